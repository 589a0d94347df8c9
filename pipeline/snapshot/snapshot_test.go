package snapshot_test

import (
	"path/filepath"
	"testing"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline/snapshot"
)

// A scan started ahead (a review starts the head's while it reads the
// base) is the scan: the same fingerprints, the same error, done once
// however many ask, and waited for before the snapshot is closed.
func TestScanAheadIsTheScan(t *testing.T) {
	dir := deploytest.HealthyDir(t, "environments: dev: namespace: \"dev\"\nenvironments: prod: namespace: \"prod\"\nreleases: app: #module: appmodule\n")
	cache := cache.Open(t.TempDir(), 0, nil)
	ahead := snapshot.Worktree(dir)
	ahead.ScanAhead(t.Context(), cache)
	ahead.ScanAhead(t.Context(), cache) // a second start is no second scan
	got, err := ahead.Scan(t.Context(), cache)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ahead.Scan(t.Context(), cache)
	if err != nil || again != got {
		t.Fatalf("a second scan of the snapshot is another tree (%v)", err)
	}
	want, err := snapshot.Worktree(dir).Scan(t.Context(), cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"dev", "prod"} {
		g, gerr := got.Of(t.Context(), "app", fingerprint.Inputs{Environment: env})
		w, werr := want.Of(t.Context(), "app", fingerprint.Inputs{Environment: env})
		if gerr != nil || werr != nil || g != w {
			t.Fatalf("%s: ahead %s (%v), in line %s (%v)", env, g, gerr, w, werr)
		}
	}
	ahead.Close()

	missing := snapshot.Worktree(filepath.Join(t.TempDir(), "nothing"))
	_, want2 := snapshot.Worktree(missing.Dir()).Scan(t.Context(), cache)
	missing.ScanAhead(t.Context(), cache)
	_, got2 := missing.Scan(t.Context(), cache)
	if want2 == nil || got2 == nil || got2.Error() != want2.Error() {
		t.Fatalf("a failed scan ahead says %v, in line %v", got2, want2)
	}
	missing.Close()
}
