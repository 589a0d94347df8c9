// Package decodefuzz fuzzes the inventory decoder. It is its own package so
// the fuzz workers do not each start the control plane the inventory
// package's store tests need.
package decodefuzz

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opmodel/pipeline/engine/inventory"
	"github.com/opmodel/pipeline/engine/manifest"
)

// FuzzDecode feeds arbitrary bytes to the decoder in place of each data
// key of a valid inventory Secret: it never panics, and when it fails the
// error names the Secret and the key at fault. The seed corpus is in
// testdata/fuzz/FuzzDecode; `make test` runs the fuzzer briefly.
func FuzzDecode(f *testing.F) {
	good := inventory.New(inventory.Release{Name: "minecraft", Namespace: "games", ReleaseID: "a3b8f2e1-7c4d-5a9e-b6f0-1234567890ab"})
	good.Record("change-sha1-00000001", inventory.Change{
		Module:         inventory.ModuleRef{Path: "opmodel.dev/modules/minecraft@v0", Version: "0.1.0", Name: "minecraft"},
		ManifestDigest: "sha256:00",
		Inventory:      inventory.EntryList{Entries: []inventory.Entry{{ID: manifest.ID{Kind: "Service", Namespace: "games", Name: "mc"}, V: "v1", Component: "app"}}},
	}, time.Date(2026, 2, 11, 14, 30, 0, 0, time.UTC), 0)
	keys := []string{"metadata", "index", "change-sha1-00000001"}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		s, err := good.Clone().Encode()
		if err != nil {
			t.Fatal(err)
		}
		key := keys[int(which)%len(keys)]
		s.Data[key] = raw
		_, err = inventory.Decode(s)
		if err == nil {
			return
		}
		msg := err.Error()
		if !strings.Contains(msg, s.Namespace+"/"+s.Name) {
			t.Fatalf("error does not name the Secret: %s", msg)
		}
		var corrupt *inventory.CorruptError
		if !errors.As(err, &corrupt) {
			t.Fatalf("not a CorruptError: %s", msg)
		}
		if !strings.Contains(msg, "opm inventory repair") {
			t.Fatalf("error does not name the repair: %s", msg)
		}
		// A broken index may blame a change it names instead.
		if !strings.Contains(msg, "data."+key) && !(key == "index" && strings.Contains(msg, "data.change-sha1-")) {
			t.Fatalf("error does not name data.%s: %s", key, msg)
		}
	})
}
