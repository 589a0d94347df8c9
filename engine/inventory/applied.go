package inventory

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Applied is an additive inventory entry field (not in the inventory RFC):
// what the server held of the object right after it was last applied (or
// found unchanged), and a hash of the desired state that was applied.
// While both still match — the render produces the same object and the
// live object has not moved — applying again can change nothing, so apply
// and diff skip the object's server-side dry run.
type Applied struct {
	// RV is the object's metadata.resourceVersion after the apply.
	RV string `json:"rv"`
	// Hash is DesiredHash of the rendered object that was applied.
	Hash string `json:"h"`
	// Live is LiveHash of the object after the apply. It still matches
	// after writes no apply could revert (a controller's status update),
	// which move RV: a Deployment's status moves for minutes after every
	// rollout. Empty in records written before it existed.
	Live string `json:"l,omitempty"`
}

// DesiredHash is a short digest of a rendered object: SHA-256 over its
// JSON (encoding/json sorts map keys, so it is canonical), 128 bits,
// unpadded base64 — 22 bytes in the Secret.
func DesiredHash(obj *unstructured.Unstructured) (string, error) {
	return hashJSON(obj.Object, 16, obj)
}

// LiveHash is a short digest (96 bits) of everything in a live object a
// server-side apply of the same configuration could act on: the object
// without its resourceVersion, without its status (unless the rendered
// object sets status, as for a kind with no status subresource), and
// with managedFields stripped of their timestamps and of the entries of
// the status subresource. Two live objects with the same LiveHash give
// the same apply result; a hand edit of any field, label or annotation,
// or a change of field ownership, changes it.
func LiveHash(live *unstructured.Unstructured, keepStatus bool) (string, error) {
	obj := maps.Clone(live.Object)
	if !keepStatus {
		delete(obj, "status")
	}
	if md, ok := live.Object["metadata"].(map[string]any); ok {
		m := maps.Clone(md)
		delete(m, "resourceVersion")
		if mf, ok := md["managedFields"].([]any); ok {
			m["managedFields"] = applyManagedFields(mf)
		}
		obj["metadata"] = m
	}
	return hashJSON(obj, 12, live)
}

// applyManagedFields is the part of managedFields an apply acts on: every
// entry but the status subresource's, without its timestamp.
func applyManagedFields(mf []any) []any {
	kept := make([]any, 0, len(mf))
	for _, e := range mf {
		em, ok := e.(map[string]any)
		if !ok {
			kept = append(kept, e)
			continue
		}
		if em["subresource"] == "status" {
			continue
		}
		c := maps.Clone(em)
		delete(c, "time")
		kept = append(kept, c)
	}
	return kept
}

func hashJSON(v any, size int, obj *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing %s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return base64.RawStdEncoding.EncodeToString(sum[:size]), nil
}

// WorstLiveHash is as long as any LiveHash: the size guard counts it for
// every object before the real ones are known.
const WorstLiveHash = "AAAAAAAAAAAAAAAA"

// keepsStatus reports whether the rendered object sets status itself:
// then status is part of what an apply acts on.
func keepsStatus(r manifest.Resource) bool {
	_, ok := r.Object.Object["status"]
	return ok
}

// UnchangedSinceApplied reports whether r provably needs no apply: the
// recorded entry carries Applied, its hash equals r's desired hash, and
// live (the object as just read, nil when absent) still has the recorded
// resourceVersion or, when that moved, the recorded LiveHash. Any other
// case — no record, a different render, a write an apply might revert —
// is false, and the caller takes the dry-run path, which judges what
// actually differs.
func UnchangedSinceApplied(recorded *Entry, r manifest.Resource, live *unstructured.Unstructured) bool {
	if !sameDesired(recorded, r, live) {
		return false
	}
	if live.GetResourceVersion() == recorded.Applied.RV {
		return true
	}
	if recorded.Applied.Live == "" {
		return false
	}
	lh, err := LiveHash(live, keepsStatus(r))
	return err == nil && lh == recorded.Applied.Live
}

// UnchangedByVersion is UnchangedSinceApplied told from live's metadata
// alone (all a metadata-only read holds): true only while the recorded
// resourceVersion stands. When it is false the whole object may still be
// unchanged by its LiveHash; UnchangedSinceApplied on it decides.
func UnchangedByVersion(recorded *Entry, r manifest.Resource, live *unstructured.Unstructured) bool {
	return sameDesired(recorded, r, live) && live.GetResourceVersion() == recorded.Applied.RV
}

// sameDesired reports a record of the last apply whose desired hash is
// r's, and a live object not being deleted.
func sameDesired(recorded *Entry, r manifest.Resource, live *unstructured.Unstructured) bool {
	if recorded == nil || recorded.Applied == nil || live == nil || recorded.Applied.RV == "" {
		return false
	}
	if live.GetDeletionTimestamp() != nil {
		return false
	}
	h, err := DesiredHash(r.Object)
	return err == nil && h == recorded.Applied.Hash
}

// AppliedByID indexes the Applied records of entries (the newest
// change's) by Kubernetes identity.
func AppliedByID(entries []Entry) map[manifest.ID]*Entry {
	out := make(map[manifest.ID]*Entry, len(entries))
	for i := range entries {
		if entries[i].Applied != nil {
			out[entries[i].ID] = &entries[i]
		}
	}
	return out
}

// LiveState is what the server returned for an object after an apply:
// its resourceVersion and, when known, the object itself — or, for an
// object told unchanged by its version alone (never read whole), the
// LiveHash its record holds for that version: the object is the one
// hashed then.
type LiveState struct {
	RV       string
	Object   *unstructured.Unstructured
	LiveHash string
}

// WithApplied returns the entries of rs with Applied filled from live
// (each object's state after the apply); an object without a known
// resourceVersion gets none and is dry-run next time.
func WithApplied(rs []manifest.Resource, live map[manifest.ID]LiveState) ([]Entry, error) {
	out := Entries(rs)
	for i, r := range rs {
		st := live[r.ID()]
		if st.RV == "" {
			continue
		}
		h, err := DesiredHash(r.Object)
		if err != nil {
			return nil, err
		}
		a := &Applied{RV: st.RV, Hash: h}
		switch {
		case st.Object != nil && st.Object.GetResourceVersion() == st.RV:
			if a.Live, err = LiveHash(st.Object, keepsStatus(r)); err != nil {
				return nil, err
			}
		case st.Object == nil:
			a.Live = st.LiveHash
		}
		out[i].Applied = a
	}
	return out, nil
}

// DropApplied removes Applied from every change of inv: only the change
// about to be recorded needs it, and history stays as small as before.
func DropApplied(inv *Inventory) {
	for _, c := range inv.Changes {
		for i := range c.Inventory.Entries {
			c.Inventory.Entries[i].Applied = nil
		}
	}
}

// Seal records how many entries c has and their digest, as written.
func (c *Change) Seal() {
	c.Objects, c.EntriesDigest = len(c.Inventory.Entries), entriesDigest(c.Inventory.Entries)
}

// Sealed reports whether c's entries are the ones its apply wrote: the
// recorded count and digest agree with them, and the change has a
// manifest digest. A change recorded before seals existed is not.
func (c *Change) Sealed() bool {
	return c.Objects == len(c.Inventory.Entries) && c.EntriesDigest != "" &&
		c.EntriesDigest == entriesDigest(c.Inventory.Entries) && strings.HasPrefix(c.ManifestDigest, "sha256:")
}

// entriesDigest hashes each entry's identity, API version and the hash
// of the object applied, in order: 128 bits, unpadded base64.
func entriesDigest(entries []Entry) string {
	h := sha256.New()
	for _, e := range entries {
		applied := ""
		if e.Applied != nil {
			applied = e.Applied.Hash
		}
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\n", e.Group, e.Kind, e.Namespace, e.Name, e.V, e.Component, applied)
	}
	return base64.RawStdEncoding.EncodeToString(h.Sum(nil)[:16])
}

// SameInputs returns the latest change when it was rendered from inputs
// fp (engine/fingerprint), is Sealed and records every object as applied, so that
// objects still Untouched since need neither a render nor a request.
func (inv *Inventory) SameInputs(fp string) (id string, c *Change, ok bool) {
	if inv == nil || fp == "" {
		return "", nil, false
	}
	id, c, ok = inv.Latest()
	if !ok || c.Inputs != fp || len(c.Inventory.Entries) == 0 || !c.Sealed() {
		return "", nil, false
	}
	for _, e := range c.Inventory.Entries {
		if e.Applied == nil || e.Applied.RV == "" {
			return "", nil, false
		}
	}
	return id, c, true
}

// Untouched reports whether live (nil when absent) is the object the
// apply that recorded e left: not being deleted, with the recorded
// resourceVersion or the recorded live hash.
func Untouched(e Entry, live *unstructured.Unstructured) bool {
	if SameVersion(e, live) {
		return true
	}
	if !HashMayTell(e, live) {
		return false
	}
	// Which hash was recorded depends on whether the rendered object kept
	// a status; either matching means the same live object.
	for _, keep := range []bool{false, true} {
		if h, err := LiveHash(live, keep); err == nil && h == e.Applied.Live {
			return true
		}
	}
	return false
}

// SameVersion is Untouched told from live's metadata alone (all a
// metadata-only read holds): the resourceVersion recorded at the last
// apply still stands and nothing deletes the object. When it is false the
// whole object may still be untouched by its LiveHash; Untouched on it
// decides.
func SameVersion(e Entry, live *unstructured.Unstructured) bool {
	return e.Applied != nil && live != nil && live.GetDeletionTimestamp() == nil && live.GetResourceVersion() == e.Applied.RV
}

// HashMayTell reports whether live, when its version moved, can still be
// untouched by its live hash: a record with one, and nothing deleting it.
// Only then is an object read as metadata worth reading whole.
func HashMayTell(e Entry, live *unstructured.Unstructured) bool {
	return e.Applied != nil && e.Applied.Live != "" && live != nil && live.GetDeletionTimestamp() == nil
}
