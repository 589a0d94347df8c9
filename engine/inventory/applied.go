package inventory

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Applied is an additive inventory entry field (not in the inventory RFC):
// the resourceVersion the server returned when the object was last applied
// (or found unchanged) and a hash of the desired state that was applied.
// While both still match — the render produces the same object and the
// live resourceVersion has not moved — applying again can change nothing,
// so apply and diff skip the object's server-side dry run.
type Applied struct {
	// RV is the object's metadata.resourceVersion after the apply.
	RV string `json:"rv"`
	// Hash is DesiredHash of the rendered object that was applied.
	Hash string `json:"h"`
}

// DesiredHash is a short digest of a rendered object: SHA-256 over its
// JSON (encoding/json sorts map keys, so it is canonical), 128 bits,
// unpadded base64 — 22 bytes in the Secret.
func DesiredHash(obj *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return "", fmt.Errorf("hashing %s/%s: %w", obj.GetKind(), obj.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return base64.RawStdEncoding.EncodeToString(sum[:16]), nil
}

// UnchangedSinceApplied reports whether r provably needs no apply: the
// recorded entry carries Applied, its hash equals r's desired hash, and
// live (the object as just read, nil when absent) still has the recorded
// resourceVersion. Any other case — no record, a different render, any
// write to the object since, status updates included — is false, and the
// caller takes the dry-run path, which judges what actually differs.
func UnchangedSinceApplied(recorded *Entry, r manifest.Resource, live *unstructured.Unstructured) bool {
	if recorded == nil || recorded.Applied == nil || live == nil || recorded.Applied.RV == "" {
		return false
	}
	if live.GetResourceVersion() != recorded.Applied.RV || live.GetDeletionTimestamp() != nil {
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
			out[entries[i].ID()] = &entries[i]
		}
	}
	return out
}

// WithApplied returns the entries of rs with Applied filled from rvs (the
// resourceVersion each object has after the apply); an object without a
// known resourceVersion gets none and is dry-run next time.
func WithApplied(rs []manifest.Resource, rvs map[manifest.ID]string) ([]Entry, error) {
	out := Entries(rs)
	for i, r := range rs {
		rv := rvs[r.ID()]
		if rv == "" {
			continue
		}
		h, err := DesiredHash(r.Object)
		if err != nil {
			return nil, err
		}
		out[i].Applied = &Applied{RV: rv, Hash: h}
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
