package inventory

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/manifest"
)

var testRelease = Release{Name: "minecraft", Namespace: "games", ReleaseID: "a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab", Environment: "staging"}

func change(values string, entries ...Entry) Change {
	return Change{
		Module:         ModuleRef{Path: "opmodel.dev/modules/minecraft@v0", Version: "0.1.0", Name: "minecraft"},
		Values:         values,
		ManifestDigest: "sha256:00",
		Inventory:      EntryList{Entries: entries},
	}
}

var t0 = time.Date(2026, 2, 11, 14, 30, 0, 0, time.UTC)

func TestSecretLayout(t *testing.T) {
	inv := New(testRelease)
	ss := Entry{ID: manifest.ID{Group: "apps", Kind: "StatefulSet", Namespace: "games", Name: "minecraft"}, V: "v1", Component: "app"}
	inv.Record("change-sha1-a3b8f2e1", change("{\n\tname: \"minecraft\"\n}", ss), t0, 0)

	s, err := inv.Encode()
	assert.NilError(t, err)
	assert.Equal(t, s.Name, "opm.minecraft.a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab")
	assert.Equal(t, s.Namespace, "games")
	assert.Equal(t, string(s.Type), "opmodel.dev/release")
	assert.DeepEqual(t, s.Labels, map[string]string{
		"app.kubernetes.io/managed-by":    "open-platform-model",
		"module.opmodel.dev/name":         "minecraft",
		"module.opmodel.dev/namespace":    "games",
		"module-release.opmodel.dev/name": "minecraft",
		"module-release.opmodel.dev/uuid": "a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab",
		"opmodel.dev/component":           "inventory",
		"environment.opmodel.dev/name":    "staging",
	})
	assert.Equal(t, len(s.Data), 3)

	var md map[string]any
	assert.NilError(t, json.Unmarshal(s.Data["metadata"], &md))
	assert.DeepEqual(t, md, map[string]any{
		"kind": "ModuleRelease", "apiVersion": "core.opmodel.dev/v1alpha1",
		"name": "minecraft", "namespace": "games", "releaseId": "a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab",
		"lastTransitionTime": "2026-02-11T14:30:00Z",
	})
	assert.Equal(t, string(s.Data["index"]), `["change-sha1-a3b8f2e1"]`)

	var ch map[string]any
	assert.NilError(t, json.Unmarshal(s.Data["change-sha1-a3b8f2e1"], &ch))
	assert.DeepEqual(t, ch, map[string]any{
		"module":         map[string]any{"path": "opmodel.dev/modules/minecraft@v0", "version": "0.1.0", "name": "minecraft"},
		"values":         "{\n\tname: \"minecraft\"\n}",
		"manifestDigest": "sha256:00",
		"timestamp":      "2026-02-11T14:30:00Z",
		"inventory": map[string]any{"entries": []any{map[string]any{
			"group": "apps", "kind": "StatefulSet", "namespace": "games", "name": "minecraft", "v": "v1", "component": "app",
		}}},
	})
}

func TestNoEnvironmentLabelWithoutEnvironment(t *testing.T) {
	rel := testRelease
	rel.Environment = ""
	s, err := New(rel).Encode()
	assert.NilError(t, err)
	_, ok := s.Labels[manifest.LabelEnvironment]
	assert.Assert(t, !ok)
	assert.Equal(t, string(s.Data["index"]), `[]`)
}

func TestRoundTrip(t *testing.T) {
	inv := New(testRelease)
	inv.Record("change-sha1-00000001", change("a", Entry{ID: manifest.ID{Kind: "Service", Namespace: "games", Name: "mc"}, V: "v1", Component: "app"}), t0, 0)
	inv.Record("change-sha1-00000002", change("b"), t0.Add(time.Hour), 0)
	s, err := inv.Encode()
	assert.NilError(t, err)
	s.ResourceVersion = "42"

	got, err := Decode(s)
	assert.NilError(t, err)
	assert.Equal(t, got.ResourceVersion(), "42")
	assert.Equal(t, got.Name(), s.Name)
	assert.DeepEqual(t, got.Index, []string{"change-sha1-00000002", "change-sha1-00000001"})
	assert.DeepEqual(t, got.Metadata, inv.Metadata)
	assert.DeepEqual(t, *got.Changes["change-sha1-00000001"], *inv.Changes["change-sha1-00000001"])
	assert.DeepEqual(t, got.LatestEntries(), []Entry{})
	assert.Equal(t, got.Release.Environment, "staging")
}

func TestDecodeRejectsBrokenSecrets(t *testing.T) {
	good := New(testRelease)
	good.Record("change-sha1-00000001", change("a"), t0, 0)
	for name, mutate := range map[string]func(data map[string][]byte){
		"index names a missing change": func(d map[string][]byte) { delete(d, "change-sha1-00000001") },
		"index is not JSON":            func(d map[string][]byte) { d["index"] = []byte("[") },
		"index entry is not a change":  func(d map[string][]byte) { d["index"] = []byte(`["values"]`) },
		"metadata is not JSON":         func(d map[string][]byte) { d["metadata"] = []byte("{") },
		"change is not JSON":           func(d map[string][]byte) { d["change-sha1-00000001"] = []byte("x") },
		"index missing":                func(d map[string][]byte) { delete(d, "index") },
		"index empty with changes":     func(d map[string][]byte) { d["index"] = []byte(`[]`) },
		"index null":                   func(d map[string][]byte) { d["index"] = []byte(`null`) },
		"metadata missing":             func(d map[string][]byte) { delete(d, "metadata") },
		"change inventory null": func(d map[string][]byte) {
			d["change-sha1-00000001"] = []byte(`{"module":{"path":"p","name":"n"},"manifestDigest":"sha256:00","inventory":null}`)
		},
		"change inventory missing": func(d map[string][]byte) {
			d["change-sha1-00000001"] = []byte(`{"module":{"path":"p","name":"n"},"manifestDigest":"sha256:00"}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := good.Encode()
			assert.NilError(t, err)
			mutate(s.Data)
			_, err = Decode(s)
			assert.ErrorContains(t, err, s.Name)
			assert.Assert(t, IsCorrupt(err), "%v", err)
			assert.ErrorContains(t, err, "opm inventory repair")
		})
	}
	t.Run("wrong type", func(t *testing.T) {
		s, err := good.Encode()
		assert.NilError(t, err)
		s.Type = "Opaque"
		_, err = Decode(s)
		assert.ErrorContains(t, err, `type "Opaque"`)
	})
}

// Scenario H at the model level: the same change ID is overwritten and
// moved to the front; a new one is prepended.
func TestRecordHistory(t *testing.T) {
	inv := New(testRelease)
	inv.Record("change-sha1-a3b8f2e1", change("X"), t0, 0)
	inv.Record("change-sha1-a3b8f2e1", change("X"), t0.Add(time.Minute), 0)
	assert.DeepEqual(t, inv.Index, []string{"change-sha1-a3b8f2e1"})
	assert.Equal(t, inv.Changes["change-sha1-a3b8f2e1"].Timestamp, "2026-02-11T14:31:00Z")

	inv.Record("change-sha1-7f2c9d01", change("Y"), t0.Add(2*time.Minute), 0)
	assert.DeepEqual(t, inv.Index, []string{"change-sha1-7f2c9d01", "change-sha1-a3b8f2e1"})

	// Back to the first change: it moves to the front, no duplicate.
	inv.Record("change-sha1-a3b8f2e1", change("X"), t0.Add(3*time.Minute), 0)
	assert.DeepEqual(t, inv.Index, []string{"change-sha1-a3b8f2e1", "change-sha1-7f2c9d01"})
	assert.Equal(t, inv.Metadata.LastTransitionTime, "2026-02-11T14:33:00Z")
	assert.Equal(t, len(inv.Changes), 2)
}

func TestRecordCapsHistory(t *testing.T) {
	inv := New(testRelease)
	for i := range 12 {
		inv.Record(fmt.Sprintf("change-sha1-%08d", i), change("v"), t0, 0)
	}
	assert.Equal(t, len(inv.Index), DefaultMaxHistory)
	assert.Equal(t, inv.Index[0], "change-sha1-00000011")
	assert.Equal(t, inv.Index[9], "change-sha1-00000002")
	assert.Equal(t, len(inv.Changes), DefaultMaxHistory)
	_, ok := inv.Changes["change-sha1-00000001"]
	assert.Assert(t, !ok, "oldest change must be removed")

	inv.Record("change-sha1-99999999", change("v"), t0, 3)
	assert.DeepEqual(t, inv.Index, []string{"change-sha1-99999999", "change-sha1-00000011", "change-sha1-00000010"})
	assert.Equal(t, len(inv.Changes), 3)
	s, err := inv.Encode()
	assert.NilError(t, err)
	assert.Equal(t, len(s.Data), 5)
}

// Edge case 10: large values are dropped from the oldest changes first.
func TestEncodeDropsOldValuesWhenTooBig(t *testing.T) {
	inv := New(testRelease)
	big := strings.Repeat("x", 250*1024) // ~333 KiB once base64-encoded
	for i := range 3 {
		inv.Record(fmt.Sprintf("change-sha1-%08d", i), change(big+fmt.Sprint(i)), t0, 0)
	}
	s, err := inv.Encode()
	assert.NilError(t, err)
	assert.Assert(t, dataSize(s.Data) <= MaxSecretBytes)
	assert.Equal(t, inv.Changes["change-sha1-00000000"].Values, "", "oldest values dropped")
	assert.Equal(t, inv.Changes["change-sha1-00000001"].Values, big+"1", "newer values kept")
	assert.Equal(t, inv.Changes["change-sha1-00000002"].Values, big+"2", "newest values kept")
	assert.Assert(t, !strings.Contains(string(s.Data["change-sha1-00000000"]), `"values"`))

	got, err := Decode(s)
	assert.NilError(t, err)
	assert.Equal(t, got.Changes["change-sha1-00000002"].Values, big+"2")
}

func TestEncodeFailsWhenTooBigWithoutValues(t *testing.T) {
	inv := New(testRelease)
	entries := make([]Entry, 0, 9000)
	for i := range 9000 {
		entries = append(entries, Entry{ID: manifest.ID{Group: "apps", Kind: "Deployment", Namespace: "games", Name: fmt.Sprintf("object-with-a-long-name-%06d", i)}, V: "v1", Component: "app"})
	}
	inv.Record("change-sha1-00000001", change("v", entries...), t0, 0)
	_, err := inv.Encode()
	assert.ErrorContains(t, err, "with only the current change (9000 objects)")
}

// A big release fills the Secret in a few changes: the oldest changes are
// dropped to fit, never the newest, and Trimmed says how many.
func TestEncodeTrimsHistoryToFit(t *testing.T) {
	inv := New(testRelease)
	entries := make([]Entry, 0, 1000)
	for i := range 1000 {
		entries = append(entries, Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: "games", Name: fmt.Sprintf("a-config-map-with-a-rather-long-name-%06d", i)}, V: "v1", Component: "app"})
	}
	for i := range 15 {
		inv.Record(fmt.Sprintf("change-sha1-%08d", i), change("v", entries...), t0, 0)
		probe := inv.Clone()
		s, err := probe.Encode()
		assert.NilError(t, err, "change %d", i)
		assert.Assert(t, dataSize(s.Data) <= MaxSecretBytes)
		assert.Equal(t, len(inv.Index), min(i+1, DefaultMaxHistory), "Clone keeps the original whole")
		if i >= 6 {
			assert.Assert(t, probe.Trimmed > 0, "change %d: %d kept", i, len(probe.Index))
		}
		assert.Equal(t, probe.Index[0], fmt.Sprintf("change-sha1-%08d", i), "the newest change is kept")
		assert.Equal(t, len(probe.Index)+probe.Trimmed, len(inv.Index))
	}
}

func TestSetLatestEntries(t *testing.T) {
	inv := New(testRelease)
	assert.ErrorContains(t, inv.SetLatestEntries(nil, t0), "no change")
	e := Entry{ID: manifest.ID{Kind: "ConfigMap", Namespace: "games", Name: "a"}, V: "v1", Component: "app"}
	inv.Record("change-sha1-00000001", change("v", e, e), t0, 0)
	assert.NilError(t, inv.SetLatestEntries([]Entry{e}, t0.Add(time.Hour)))
	assert.Check(t, is.Len(inv.LatestEntries(), 1))
	assert.Equal(t, inv.Metadata.LastTransitionTime, "2026-02-11T15:30:00Z")
}
