package pipeline

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/rendercache"
)

// UnchangedRelease is a release × environment a review did not render:
// its input fingerprints are equal on both sides, so are its renders.
type UnchangedRelease struct {
	Release     string `json:"release"`
	Environment string `json:"environment,omitempty"`
}

// scanReviewSides parses both sides without evaluating them. ok is false
// when fingerprints cannot decide (NoSkip, syntax the scan cannot follow,
// a group or an unknown name asked for): then both sides are loaded as
// before.
func scanReviewSides(ctx context.Context, opts ReviewOptions) (head, base *reviewSide, ok bool) {
	if opts.NoSkip {
		return nil, nil, false
	}
	scan := func(name, dir string, required bool, overlay map[string][]byte, scanned *fingerprint.Tree) (*reviewSide, bool) {
		s := &reviewSide{name: name, dir: dir, overlay: overlay}
		if !required {
			if dir == "" {
				return s, true
			}
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				return s, true
			}
		}
		t := scanned
		if t == nil {
			p, err := load.ParseImports(ctx, dir, overlay)
			if err != nil {
				return nil, false
			}
			if t, err = fingerprint.Scan(ctx, p); err != nil {
				return nil, false
			}
			t.UseCache(cacheDir("environments"))
		}
		if t.Sure() != nil {
			return nil, false
		}
		envs, exact := t.Environments(ctx)
		if !exact {
			return nil, false
		}
		s.present, s.tree, s.releases, s.envs = true, t, t.Releases(), envs
		return s, true
	}
	// One side after the other: cue/load parses in parallel already.
	if head, ok = scan("head", opts.Selection.renderOptions().Dir, true, nil, nil); !ok {
		return nil, nil, false
	}
	if base, ok = scan("base", opts.BaseDir, false, opts.baseOverlay, opts.baseTree); !ok {
		return nil, nil, false
	}
	// Groups are read by evaluating environments: leave them to the load.
	want := slices.Clone(opts.Environments)
	if len(want) == 0 && opts.Environment != "" {
		want = strings.Split(opts.Environment, ",")
	}
	all := reviewUnion(head.envs, base.envs)
	for _, e := range want {
		if !slices.Contains(all, strings.TrimSpace(e)) {
			return nil, nil, false
		}
	}
	if opts.Group != "" {
		return nil, nil, false
	}
	return head, base, true
}

// identicalUnits finds the release × environment units both sides
// declare with equal input fingerprints, marks them on the head side so
// nothing renders them, and returns them in review order.
func identicalUnits(ctx context.Context, opts ReviewOptions, head, base *reviewSide, envs, keys []string) []UnchangedRelease {
	if head.tree == nil || base.tree == nil {
		return nil
	}
	ro := opts.Selection.renderOptions()
	var out []UnchangedRelease
	head.identical = map[string]bool{}
	for _, env := range envs {
		for _, key := range keys {
			if !head.declares(key, env) || !base.declares(key, env) {
				continue
			}
			in := fingerprint.Inputs{Environment: env, ValuesFiles: ro.ValuesFiles, Values: ro.Values}
			h, herr := head.tree.Of(ctx, key, in)
			b, berr := base.tree.Of(ctx, key, in)
			if herr != nil || berr != nil || h != b {
				continue
			}
			head.identical[unitKey(env, key)] = true
			out = append(out, UnchangedRelease{Release: key, Environment: env})
		}
	}
	return out
}

// pruneSides limits each scanned side's evaluation to the releases that
// are rendered: those of the units reviewed here, neither identical nor
// found in the render cache, that it declares. A side with none is not
// evaluated at all.
func pruneSides(head, base *reviewSide, envs, keys []string) {
	for _, side := range []*reviewSide{head, base} {
		if !side.present || side.tree == nil {
			continue
		}
		var rendered []string
		for _, key := range keys {
			for _, env := range envs {
				u := unitKey(env, key)
				if worthReviewing(head, base, key, env) && side.cached[u] == nil && side.declares(key, env) && !slices.Contains(rendered, key) {
					rendered = append(rendered, key)
				}
			}
		}
		if len(rendered) == 0 {
			side.nothingToRender = true
			continue
		}
		side.pruned = fingerprint.PrunedRoot(side.dir, rendered, side.overlay)
	}
}

// reviewCache is the render cache a review reads and writes: none with
// NoCache or NoSkip, or when the sides could not be fingerprinted.
func reviewCache(opts ReviewOptions, scanned bool) *rendercache.Cache {
	if opts.NoCache || opts.NoSkip || !scanned {
		return nil
	}
	max, _ := strconv.ParseInt(os.Getenv(EnvCacheMaxBytes), 10, 64)
	return rendercache.Open(cacheDir("renders"), max)
}

// EnvCacheMaxBytes bounds the render cache (bytes; default 1 GiB).
const EnvCacheMaxBytes = "OPM_CACHE_MAX_BYTES"

// lookUpRenders finds, for each unit reviewed here, each side's render
// in the cache by the unit's input fingerprint on that side. What is
// found is never rendered; what is not is stored once rendered.
func lookUpRenders(ctx context.Context, opts ReviewOptions, cache *rendercache.Cache, head, base *reviewSide, envs, keys []string) {
	if cache == nil {
		return
	}
	ro := opts.Selection.renderOptions()
	for _, side := range []*reviewSide{head, base} {
		if side.tree == nil {
			continue
		}
		side.cache, side.cached, side.fps = cache, map[string]*render.Release{}, map[string]string{}
		for _, env := range envs {
			for _, key := range keys {
				if !worthReviewing(head, base, key, env) || !side.declares(key, env) {
					continue
				}
				fp, err := side.tree.Of(ctx, key, fingerprint.Inputs{Environment: env, ValuesFiles: ro.ValuesFiles, Values: ro.Values})
				if err != nil {
					continue
				}
				u := unitKey(env, key)
				side.fps[u] = fp
				if rel, _, ok := cache.Get(fp); ok {
					side.cached[u] = rel
				}
			}
		}
	}
}
