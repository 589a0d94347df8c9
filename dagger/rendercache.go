package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"dagger/opm/internal/dagger"
)

// The render cache in a cache volume.
//
// opm runs in-process, in the module's runtime container, where no cache
// volume can be mounted; so a review's render cache (content-addressed,
// verified on read: engine/rendercache) is copied from the volume into the
// module's working directory before the review and back after it. A
// helper container does the copying with the volume mounted LOCKED, so
// concurrent calls copy one at a time; between the copies they work on
// their own copy, and the last to save wins. Losing another call's
// entries only costs renders later: an entry is whole or absent, and one
// that fails verification is a miss.

// renderCacheVolume names the volume (Dagger namespaces it to this module).
const renderCacheVolume = "opm-render-cache"

// cacheToolImage copies between the volume and the module: a shell, cp
// and find.
const cacheToolImage = "busybox:1.37.0"

// moduleWorkdir is the module runtime's working directory, the one
// CurrentModule.Workdir reads back (the engine's runtimeWorkdirPath).
const moduleWorkdir = "/scratch"

// renderCacheDir is where, under moduleWorkdir, a call keeps its copy.
const renderCacheDir = "opm-cache"

// restoreRenderCache copies the volume's render cache into the module's
// working directory and returns that directory (ReviewOptions.CacheDir).
// A volume that cannot be read leaves the directory empty: the review
// renders what it would have read, and says why on stderr.
func restoreRenderCache(ctx context.Context) string {
	dir := filepath.Join(moduleWorkdir, renderCacheDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "opm: no render cache: %v\n", err)
		return ""
	}
	restored := dag.Container().From(cacheToolImage).
		// Never served from the engine's cache: the volume changes under
		// an identical command.
		WithEnvVariable("OPM_CACHE_RESTORE", fmt.Sprint(time.Now().UnixNano())).
		WithMountedCache("/cache", dag.CacheVolume(renderCacheVolume), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}).
		WithExec([]string{"sh", "-c", "mkdir -p /restored && cp -a /cache/. /restored/"}).
		Directory("/restored")
	if _, err := restored.Export(ctx, dir); err != nil {
		fmt.Fprintf(os.Stderr, "opm: the render cache volume %s could not be read, rendering without it: %v\n", renderCacheVolume, err)
	}
	return dir
}

// saveRenderCache makes the volume hold what the review left in its copy
// (which the review trimmed to OPM_CACHE_MAX_BYTES, so the volume stays
// bounded too). A failure is reported, never the review's: the result
// does not depend on the cache.
func saveRenderCache(ctx context.Context, dir string) {
	if dir == "" {
		return
	}
	_, err := dag.Container().From(cacheToolImage).
		WithMountedDirectory("/saved", dag.CurrentModule().Workdir(renderCacheDir)).
		WithMountedCache("/cache", dag.CacheVolume(renderCacheVolume), dagger.ContainerWithMountedCacheOpts{Sharing: dagger.CacheSharingModeLocked}).
		WithExec([]string{"sh", "-c", "find /cache -mindepth 1 -maxdepth 1 -exec rm -rf {} + && cp -a /saved/. /cache/"}).
		Sync(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "opm: the render cache could not be saved to the volume %s: %v\n", renderCacheVolume, err)
	}
}
