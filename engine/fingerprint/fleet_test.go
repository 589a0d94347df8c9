package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	opmcache "github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/fleet"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/internal/deploytest"
)

const fleetHeader = deploytest.Header + "releases: app: #module: appmodule\n"

// generatedFleet is n environments with random groups, gates (earlier
// environments and groups mostly, sometimes later ones: cycles and
// self-gates), waves (some contradicting their gates), soaks (some not
// durations) and cluster contexts.
func generatedFleet(r *rand.Rand) string {
	var b strings.Builder
	n := 2 + r.IntN(5)
	groups := []string{"", "canary", "prod"}
	for i := range n {
		fmt.Fprintf(&b, "environments: e%d: {namespace: \"app\"", i)
		if g := groups[r.IntN(len(groups))]; g != "" {
			fmt.Fprintf(&b, ", group: %q", g)
		}
		if r.IntN(4) == 0 {
			fmt.Fprintf(&b, ", cluster: kubeContext: \"ctx-%d\"", r.IntN(2))
		}
		var rollout []string
		if r.IntN(2) == 0 {
			var after []string
			for range 1 + r.IntN(2) {
				switch k := r.IntN(10); {
				case k < 6 && i > 0:
					after = append(after, fmt.Sprintf("%q", fmt.Sprintf("e%d", r.IntN(i))))
				case k < 8:
					after = append(after, fmt.Sprintf("%q", groups[1+r.IntN(2)]))
				default:
					after = append(after, fmt.Sprintf("%q", fmt.Sprintf("e%d", r.IntN(n+1))))
				}
			}
			rollout = append(rollout, "after: ["+strings.Join(after, ", ")+"]")
		}
		if r.IntN(3) == 0 {
			rollout = append(rollout, fmt.Sprintf("wave: %d", r.IntN(4)))
		}
		if r.IntN(3) == 0 {
			rollout = append(rollout, fmt.Sprintf("soak: %q", []string{"10m", "1h30m", "0s", "soon"}[r.IntN(4)]))
		}
		if len(rollout) > 0 {
			b.WriteString(", rollout: {" + strings.Join(rollout, ", ") + "}")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// fleetOf is the fleet as the fingerprints read it, through cache.
func fleetOf(t *testing.T, dir, cache string) (*fleet.Fleet, error) {
	t.Helper()
	p, err := load.ParseImports(t.Context(), dir, nil)
	assert.NilError(t, err)
	tree, err := fingerprint.Scan(t.Context(), p)
	assert.NilError(t, err)
	tree.UseCache(opmcache.Open(cache, 0, nil))
	return tree.Fleet(t.Context())
}

// loadedFleet is the fleet as a command that loads the deployment reads it.
func loadedFleet(t *testing.T, dir string) (*fleet.Fleet, error) {
	t.Helper()
	d, err := load.Load(t.Context(), dir)
	if err != nil {
		return nil, err
	}
	return fleet.Read(d)
}

// sameFleet fails unless the fingerprints' fleet is the loaded one: the
// same environments, gates, waves, soaks and positions, or the same
// error; where the declarations cannot be read without the load, the
// fingerprints say so (ErrUnsure) and the caller loads.
func sameFleet(t *testing.T, what string, got *fleet.Fleet, gotErr error, want *fleet.Fleet, wantErr error) {
	t.Helper()
	if wantErr != nil {
		if errors.Is(gotErr, fingerprint.ErrUnsure) {
			return
		}
		assert.Assert(t, gotErr != nil, "%s: the load fails (%v), the fingerprints' fleet does not", what, wantErr)
		assert.Equal(t, gotErr.Error(), wantErr.Error(), what)
		return
	}
	assert.NilError(t, gotErr, what)
	// %+v prints the unexported wave positions too.
	assert.Equal(t, fmt.Sprintf("%+v", got.Environments), fmt.Sprintf("%+v", want.Environments), what)
}

// The fleet read from the environments the fingerprints evaluate is the
// fleet fleet.Read finds in the loaded deployment, on generated fleets,
// evaluated and read back from the cache by a copy of the deployment in
// another directory (whose positions must name that copy).
func TestFleetIsTheLoadedFleet(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 48))
	cache := t.TempDir()
	var good, bad, unsure int
	seen := map[string]bool{}
	for i := range 24 {
		envs := generatedFleet(r)
		what := fmt.Sprintf("fleet %d:\n%s", i, envs)
		files := map[string]string{"deploy.cue": fleetHeader + envs}
		first, copied := deploytest.Write(t, files), deploytest.Write(t, files)

		want, wantErr := loadedFleet(t, first)
		got, gotErr := fleetOf(t, first, cache)
		sameFleet(t, what, got, gotErr, want, wantErr)
		switch {
		case wantErr == nil:
			good++
		case errors.Is(gotErr, fingerprint.ErrUnsure):
			unsure++
		default:
			bad++
		}

		// An evaluation that fails as a whole is not cached (it is
		// retried); every other one is, the fleet with it.
		entry := newEntry(t, cache, seen)
		assert.Equal(t, entry == "", errors.Is(gotErr, fingerprint.ErrUnsure) && !fleetBad(entry), "%s: cached %q, read %v", what, entry, gotErr)

		want, wantErr = loadedFleet(t, copied)
		got, gotErr = fleetOf(t, copied, cache)
		sameFleet(t, what+"(the copy, from the cache)", got, gotErr, want, wantErr)
		// The copy read the entry the first wrote: a miss would have
		// written it again, naming the copy.
		if entry == "" {
			continue
		}
		var stored struct{ Dir string }
		assert.NilError(t, json.Unmarshal(entryBody(t, entry), &stored))
		assert.Equal(t, stored.Dir, first, "%s: the copy did not read the cached evaluation", what)
	}
	t.Logf("%d fleets read, %d refused alike, %d left to the load", good, bad, unsure)
	assert.Assert(t, good >= 6 && bad >= 3 && unsure >= 1, "the generator no longer covers every case: %d good, %d bad, %d unsure", good, bad, unsure)
}

// newEntry is the one cache entry not seen before, now seen.
func newEntry(t *testing.T, cache string, seen map[string]bool) string {
	t.Helper()
	entries, err := filepath.Glob(filepath.Join(cache, "*", "*"))
	assert.NilError(t, err)
	var added []string
	for _, e := range entries {
		if !seen[e] {
			added, seen[e] = append(added, e), true
		}
	}
	assert.Assert(t, len(added) <= 1, "one evaluation, one cache entry: %v", added)
	if len(added) == 0 {
		return ""
	}
	return added[0]
}

// fleetBad says whether the cache entry at path holds environments whose
// fleet declarations could not be read ("" holds none).
func fleetBad(path string) bool {
	if path == "" {
		return false
	}
	b, _ := os.ReadFile(path)
	_, body, _ := bytes.Cut(b, []byte("\n"))
	var e struct{ FleetBad bool }
	return json.Unmarshal(body, &e) == nil && e.FleetBad
}

// entryBody is what the cache entry at path holds after its seal line.
func entryBody(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	_, body, ok := bytes.Cut(b, []byte("\n"))
	assert.Assert(t, ok, "%s has no seal line", path)
	return body
}
