package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opmodel/pipeline/engine/manifest"
)

// Names, labels and limits of the inventory Secret (RFC 004, "Secret
// Structure Overview" and "Labels on the Inventory Secret").
const (
	SecretType = "opmodel.dev/release"

	// The Secret also carries manifest's identity labels (managed-by,
	// release name and uuid, environment).
	LabelModuleName      = "module.opmodel.dev/name"
	LabelModuleNamespace = "module.opmodel.dev/namespace"
	// LabelComponent marks OPM infrastructure objects; it is not the
	// component.opmodel.dev/name label of rendered objects (decision 3).
	LabelComponent     = "opmodel.dev/component"
	ComponentInventory = "inventory"
	// ComponentLock marks the release lock's Lease; ComponentBackup a
	// copy of an inventory Secret that repair replaced.
	ComponentLock   = "lock"
	ComponentBackup = "inventory-backup"
	// Annotations of a backup: the Secret it copies, its type and version.
	AnnotationBackupOf      = "opmodel.dev/backup-of"
	AnnotationBackupType    = "opmodel.dev/backup-type"
	AnnotationBackupVersion = "opmodel.dev/backup-resource-version"

	MetadataKind       = "ModuleRelease"
	MetadataAPIVersion = "core.opmodel.dev/v1alpha1"

	keyMetadata  = "metadata"
	keyIndex     = "index"
	changePrefix = "change-sha1-"

	// DefaultMaxHistory is how many changes a Secret keeps by default.
	DefaultMaxHistory = 10
	// MaxSecretBytes is where values start being dropped from old changes,
	// then old changes themselves: etcd refuses objects over 1 MiB and the
	// rest of the object needs room.
	MaxSecretBytes = 800 * 1024
)

// Release identifies the release an inventory belongs to.
type Release struct {
	Name      string
	Namespace string
	ReleaseID string
	// Environment is empty when the release was rendered without one.
	Environment string
}

// SecretName is the inventory Secret's name: opm.<release>.<release-id>.
func SecretName(releaseName, releaseID string) string {
	return "opm." + releaseName + "." + releaseID
}

// Metadata is data.metadata: the release, typed so the format can evolve
// into a ModuleRelease custom resource.
type Metadata struct {
	Kind               string `json:"kind"`
	APIVersion         string `json:"apiVersion"`
	Name               string `json:"name"`
	Namespace          string `json:"namespace"`
	ReleaseID          string `json:"releaseId"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

// ModuleRef is the module a change deployed.
type ModuleRef struct {
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
	Name    string `json:"name"`
	// Local replaces Version for a module applied without one.
	Local bool `json:"local,omitempty"`
}

// Change is one data.change-sha1-<8hex> entry.
type Change struct {
	Module ModuleRef `json:"module"`
	// Values is the resolved values as CUE text; empty after it was dropped
	// to keep the Secret under MaxSecretBytes.
	Values         string    `json:"values,omitempty"`
	ManifestDigest string    `json:"manifestDigest"`
	Timestamp      string    `json:"timestamp"`
	Inventory      EntryList `json:"inventory"`
	// Source says where the change came from; nil when nothing is known
	// (and for changes recorded before sources were).
	Source *Source `json:"source,omitempty"`
	// Inputs is the render's input fingerprint (engine/fingerprint):
	// a later apply with the same one may skip rendering. Empty when the
	// syntax could not tell, and for older changes.
	Inputs string `json:"inputs,omitempty"`
	// Objects and EntriesDigest seal the entries as the apply wrote them
	// (Seal): a skip trusts a change only while they agree, so an entry
	// removed or edited by hand sends the next apply down the full path.
	Objects       int    `json:"objects,omitempty"`
	EntriesDigest string `json:"entriesDigest,omitempty"`
	// Sensitive: the manifest digest and change ID depend on secret data,
	// so public outputs show them sealed (engine/redact).
	Sensitive bool `json:"sensitive,omitempty"`
	// Reach is where the environment let the release write when it was
	// applied; nil for changes recorded before it was.
	Reach *Reach `json:"reach,omitempty"`
	// First is when, from which commit and by whom this change was first
	// applied, once a re-apply moved Timestamp and Source on (they say when
	// and from where it was applied last); nil while they are the first
	// apply, and in records written before it existed: FirstApplied.
	First *Sighting `json:"first,omitempty"`
	// Seen are the other applies of the change since its first: from a
	// commit that left this release as it was, or a return to it after
	// another change ran (a rollback), newest first, at most MaxSightings:
	// what lets a rollback by commit find it.
	Seen []Sighting `json:"seen,omitempty"`
	// Running is when the release started running this change the last
	// time (its health clock): the first apply, or the latest return to it
	// after another change; empty while that is the first apply, and in
	// records written before it existed (Clock).
	Running string `json:"running,omitempty"`
	// ForcedFrom are the field managers, outside the take-over set, whose
	// conflicting fields this apply took because it was told to
	// (--force-conflicts); empty for every other apply.
	ForcedFrom []string `json:"forcedFrom,omitempty"`
}

// Reach is an environment's namespaces as an inventory records them.
type Reach struct {
	// Namespaces are names and globs; ["*"] for a release applied without
	// an environment, which nothing limits.
	Namespaces    []string `json:"namespaces"`
	ClusterScoped bool     `json:"clusterScoped,omitempty"`
}

// Allows reports whether the reach covers an entry; a nil reach covers
// everything (nothing limited the release).
func (r *Reach) Allows(e Entry) bool {
	if r == nil {
		return true
	}
	match := func(ns string) bool { return NamespaceMatches(r.Namespaces, ns) }
	if e.Namespace == "" {
		return r.ClusterScoped || (e.Group == "" && e.Kind == "Namespace" && match(e.Name))
	}
	return match(e.Namespace)
}

// NamespaceMatches reports whether namespace ns is one of names or
// matches one of its globs (path.Match: team-a-*): the one matcher of an
// environment's namespaces, for what a render may write and what an
// inventory may hold.
func NamespaceMatches(names []string, ns string) bool {
	return slices.ContainsFunc(names, func(glob string) bool {
		ok, err := path.Match(glob, ns)
		return err == nil && ok
	})
}

// HoldsSecrets reports whether c's identifiers depend on secret data: it
// says so, or (for changes recorded before it could) it lists a Secret.
func (c *Change) HoldsSecrets() bool {
	if c.Sensitive {
		return true
	}
	for _, e := range c.Inventory.Entries {
		if e.IsSecret() || e.Secret || e.SecretName {
			return true
		}
	}
	return false
}

// EntryList is the inventory of one change.
type EntryList struct {
	Entries []Entry `json:"entries"`
}

// Inventory is the decoded inventory Secret of one release.
type Inventory struct {
	Release  Release
	Metadata Metadata
	// Index lists change IDs, newest first.
	Index   []string
	Changes map[string]*Change
	// Trimmed counts the oldest changes Encode removed to stay under
	// MaxSecretBytes.
	Trimmed int

	name   string
	labels map[string]string
	// resourceVersion is what the Secret had when read; only Decode sets
	// it, so a write can never carry a fabricated version (decision 11).
	resourceVersion string
}

// New returns the empty inventory of a release that has none yet.
func New(rel Release) *Inventory {
	return &Inventory{
		Release: rel,
		Metadata: Metadata{
			Kind: MetadataKind, APIVersion: MetadataAPIVersion,
			Name: rel.Name, Namespace: rel.Namespace, ReleaseID: rel.ReleaseID,
		},
		Changes: map[string]*Change{},
		name:    SecretName(rel.Name, rel.ReleaseID),
	}
}

// Name is the Secret's name.
func (inv *Inventory) Name() string { return inv.name }

// Namespace is the Secret's namespace, the release's.
func (inv *Inventory) Namespace() string { return inv.Release.Namespace }

// ResourceVersion is the version the Secret had when it was read, empty
// for an inventory that is not stored yet.
func (inv *Inventory) ResourceVersion() string { return inv.resourceVersion }

// Latest returns the newest change and its ID; ok is false when there is none.
func (inv *Inventory) Latest() (id string, c *Change, ok bool) {
	if len(inv.Index) == 0 {
		return "", nil, false
	}
	c, ok = inv.Changes[inv.Index[0]]
	return inv.Index[0], c, ok
}

// LatestWithin returns the newest change's entries that reach covers, and
// apart those it does not. Reach is the environment's, from the deployment
// directory, never what the Secret says: anyone who may create Secrets in
// the release's namespace can plant an inventory recording another team's
// objects, and diff, status and apply must not read (or list as stale)
// what the environment may not touch.
func (inv *Inventory) LatestWithin(reach *Reach) (within, outside []Entry) {
	for _, e := range inv.LatestEntries() {
		if reach.Allows(e) {
			within = append(within, e)
		} else {
			outside = append(outside, e)
		}
	}
	return within, outside
}

// OutsideWarning says what an inventory records beyond the environment's
// reach and that it was left alone; "" for none.
func OutsideWarning(name string, outside []Entry) string {
	if len(outside) == 0 {
		return ""
	}
	ids := make([]string, 0, min(len(outside), 3))
	for _, e := range outside[:min(len(outside), 3)] {
		ids = append(ids, e.ID.String())
	}
	more := ""
	if len(outside) > 3 {
		more = fmt.Sprintf(" and %d more", len(outside)-3)
	}
	return fmt.Sprintf("the inventory Secret %s records %s%s outside where the environment may write: not read, diffed or pruned (planted, or the environment's namespaces were narrowed since; delete such objects by hand)", name, strings.Join(ids, ", "), more)
}

// LatestEntries returns the newest change's entries, nil when there is none.
func (inv *Inventory) LatestEntries() []Entry {
	if _, c, ok := inv.Latest(); ok {
		return c.Inventory.Entries
	}
	return nil
}

// Record makes c the newest change under id: a new ID is prepended, a
// known one is overwritten and moved to the front (an idempotent re-apply
// does not grow the history) keeping when, where and by whom it was first
// applied, the commits it was seen at, and its health clock (carryOver). Changes beyond maxHistory (DefaultMaxHistory
// when < 1) are removed, oldest first.
func (inv *Inventory) Record(id string, c Change, now time.Time, maxHistory int) {
	if maxHistory < 1 {
		maxHistory = DefaultMaxHistory
	}
	ts := now.UTC().Format(time.RFC3339)
	c.Timestamp = ts
	c.First, c.Seen, c.Running = nil, nil, "" // a first apply: Timestamp and Source say it all
	if prev := inv.Changes[id]; prev != nil {
		latest, _, _ := inv.Latest()
		c.carryOver(prev, ts, latest == id)
	}
	inv.Metadata.LastTransitionTime = ts
	inv.Changes[id] = &c
	inv.Index = slices.DeleteFunc(inv.Index, func(s string) bool { return s == id })
	inv.Index = slices.Insert(inv.Index, 0, id)
	for len(inv.Index) > maxHistory {
		delete(inv.Changes, inv.Index[len(inv.Index)-1])
		inv.Index = inv.Index[:len(inv.Index)-1]
	}
}

// SetLatestEntries replaces the newest change's entries (prune removes
// what it deleted) and stamps the transition time.
func (inv *Inventory) SetLatestEntries(entries []Entry, now time.Time) error {
	_, c, ok := inv.Latest()
	if !ok {
		return fmt.Errorf("inventory %s/%s has no change to update", inv.Namespace(), inv.name)
	}
	c.Inventory.Entries = entries
	c.Seal()
	inv.Metadata.LastTransitionTime = now.UTC().Format(time.RFC3339)
	return nil
}

// Labels are the Secret's labels.
func (inv *Inventory) Labels() map[string]string {
	l := maps.Clone(inv.labels)
	if l == nil {
		l = map[string]string{}
	}
	l[manifest.LabelManagedBy] = manifest.ManagedByOPM
	l[LabelModuleName] = inv.Release.Name
	l[LabelModuleNamespace] = inv.Release.Namespace
	l[manifest.LabelReleaseName] = inv.Release.Name
	l[manifest.LabelReleaseUUID] = inv.Release.ReleaseID
	l[LabelComponent] = ComponentInventory
	if inv.Release.Environment != "" {
		l[manifest.LabelEnvironment] = inv.Release.Environment
	}
	return l
}

// Encode builds the Secret. When the data would exceed MaxSecretBytes,
// values are dropped from the older changes first (oldest first), then
// the oldest changes themselves (Trimmed counts them); the newest change
// is always kept whole, and if it alone cannot fit that is an error. The
// returned Secret carries the read resourceVersion.
func (inv *Inventory) Encode() (*corev1.Secret, error) {
	for _, id := range inv.Index {
		if _, ok := inv.Changes[id]; !ok {
			return nil, fmt.Errorf("inventory %s/%s: index names %s, which has no entry", inv.Namespace(), inv.name, id)
		}
	}
	data, err := inv.encodeData()
	if err != nil {
		return nil, err
	}
	for i := len(inv.Index) - 1; i >= 1 && dataSize(data) > MaxSecretBytes; i-- {
		id := inv.Index[i]
		if inv.Changes[id].Values == "" {
			continue
		}
		inv.Changes[id].Values = ""
		if data[id], err = json.Marshal(inv.Changes[id]); err != nil {
			return nil, fmt.Errorf("encode inventory change %s: %w", id, err)
		}
	}
	for len(inv.Index) > 1 && dataSize(data) > MaxSecretBytes {
		oldest := inv.Index[len(inv.Index)-1]
		inv.Index = inv.Index[:len(inv.Index)-1]
		delete(inv.Changes, oldest)
		delete(data, oldest)
		inv.Trimmed++
		if data[keyIndex], err = json.Marshal(inv.Index); err != nil {
			return nil, fmt.Errorf("encode inventory index: %w", err)
		}
	}
	if n := dataSize(data); n > MaxSecretBytes {
		return nil, fmt.Errorf("inventory Secret %s/%s would be %d bytes with only the current change (%d objects), over the %d byte limit: "+
			"split the release into smaller ones", inv.Namespace(), inv.name, n, len(inv.LatestEntries()), MaxSecretBytes)
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: inv.name, Namespace: inv.Namespace(),
			Labels: inv.Labels(), ResourceVersion: inv.resourceVersion,
		},
		Type: SecretType,
		Data: data,
	}, nil
}

// Clone is a deep copy, so a size check can encode (and trim) it without
// touching inv.
func (inv *Inventory) Clone() *Inventory {
	c := *inv
	c.Index = slices.Clone(inv.Index)
	c.Changes = make(map[string]*Change, len(inv.Changes))
	for id, ch := range inv.Changes {
		cc := *ch
		cc.Inventory.Entries = slices.Clone(ch.Inventory.Entries)
		c.Changes[id] = &cc
	}
	c.labels = maps.Clone(inv.labels)
	return &c
}

func (inv *Inventory) encodeData() (map[string][]byte, error) {
	data := make(map[string][]byte, len(inv.Index)+2)
	var err error
	if data[keyMetadata], err = json.Marshal(inv.Metadata); err != nil {
		return nil, fmt.Errorf("encode inventory metadata: %w", err)
	}
	index := inv.Index
	if index == nil {
		index = []string{}
	}
	if data[keyIndex], err = json.Marshal(index); err != nil {
		return nil, fmt.Errorf("encode inventory index: %w", err)
	}
	for _, id := range inv.Index {
		c := inv.Changes[id]
		if c.Inventory.Entries == nil {
			c.Inventory.Entries = []Entry{}
		}
		if data[id], err = json.Marshal(c); err != nil {
			return nil, fmt.Errorf("encode inventory change %s: %w", id, err)
		}
	}
	return data, nil
}

// dataSize is what the data costs in the stored object: keys plus base64 values.
func dataSize(data map[string][]byte) int {
	n := 0
	for k, v := range data {
		n += len(k) + (len(v)+2)/3*4
	}
	return n
}

// RepairHint says how to get out of a corrupt inventory.
const RepairHint = "rebuild it with `opm inventory repair` (it keeps this data in a backup Secret and records what carries the release's id plus what the release renders)"

// CorruptError says an inventory Secret cannot be trusted: a key is
// missing or undecodable, or the index and the changes disagree. Pruning
// from it could delete the wrong objects, and treating it as empty would
// drop its history, so every command stops and points at the repair.
type CorruptError struct {
	Namespace, Name string
	// Key is the data key at fault ("metadata", "index", a change ID, or
	// "type" for the Secret's type).
	Key string
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("inventory Secret %s/%s is corrupt: data.%s: %v; %s", e.Namespace, e.Name, e.Key, e.Err, RepairHint)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Decode reads an inventory Secret. Changes the index does not name are
// ignored. Anything that makes the inventory untrustworthy is a
// *CorruptError naming the Secret and the key: a missing or undecodable
// metadata or index, an index naming a missing or undecodable change, an
// empty index while changes exist, a change without an inventory.
func Decode(s *corev1.Secret) (*Inventory, error) {
	corrupt := func(key string, format string, args ...any) error {
		return &CorruptError{Namespace: s.Namespace, Name: s.Name, Key: key, Err: fmt.Errorf(format, args...)}
	}
	if s.Type != SecretType {
		return nil, fmt.Errorf("inventory Secret %s/%s has type %q, not %q", s.Namespace, s.Name, s.Type, SecretType)
	}
	inv := &Inventory{
		Changes:         map[string]*Change{},
		name:            s.Name,
		labels:          maps.Clone(s.Labels),
		resourceVersion: s.ResourceVersion,
	}
	raw, ok := s.Data[keyMetadata]
	if !ok {
		return nil, corrupt(keyMetadata, "missing")
	}
	if err := json.Unmarshal(raw, &inv.Metadata); err != nil {
		return nil, corrupt(keyMetadata, "%w", err)
	}
	inv.Release = Release{
		Name: inv.Metadata.Name, Namespace: s.Namespace, ReleaseID: inv.Metadata.ReleaseID,
		Environment: s.Labels[manifest.LabelEnvironment],
	}
	raw, ok = s.Data[keyIndex]
	if !ok {
		return nil, corrupt(keyIndex, "missing")
	}
	if err := json.Unmarshal(raw, &inv.Index); err != nil {
		return nil, corrupt(keyIndex, "%w", err)
	}
	if inv.Index == nil {
		return nil, corrupt(keyIndex, "null, not a list of change IDs")
	}
	if len(inv.Index) == 0 {
		for k := range s.Data {
			if strings.HasPrefix(k, changePrefix) {
				return nil, corrupt(keyIndex, "empty, but change %s exists", k)
			}
		}
	}
	seen := map[string]bool{}
	for _, id := range inv.Index {
		if !strings.HasPrefix(id, changePrefix) {
			return nil, corrupt(keyIndex, "entry %q is not a change ID", id)
		}
		if seen[id] {
			return nil, corrupt(keyIndex, "names %s twice", id)
		}
		seen[id] = true
		raw, ok := s.Data[id]
		if !ok {
			return nil, corrupt(id, "missing, but the index names it")
		}
		c, err := decodeChange(raw)
		if err != nil {
			return nil, corrupt(id, "%w", err)
		}
		inv.Changes[id] = c
	}
	return inv, nil
}

// decodeChange decodes one change, which must record an inventory (an
// empty list is fine; null or missing is not).
func decodeChange(raw []byte) (*Change, error) {
	var shape struct {
		Inventory *struct {
			Entries *[]Entry `json:"entries"`
		} `json:"inventory"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, err
	}
	if shape.Inventory == nil || shape.Inventory.Entries == nil {
		return nil, errors.New("it records no inventory (null or missing)")
	}
	c := &Change{}
	if err := json.Unmarshal(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Verify checks, before an inventory found by name or id alone is
// trusted, that it is what the seeds say an inventory is: its Secret's
// name is the one derived from the release name and id it records, its
// metadata and labels agree with each other and with the namespace it is
// in, and every object it records (in any change) is in that namespace.
// An inventory planted by someone who may create Secrets in one namespace
// therefore cannot make `opm delete --name` read or delete anything
// outside it. The error names what disagrees.
func (inv *Inventory) Verify() error {
	ns, name := inv.Release.Namespace, inv.name
	bad := func(format string, args ...any) error {
		return fmt.Errorf("inventory Secret %s/%s is not trusted: %s; it was not written by opm for this release (planted or edited by hand): inspect it with kubectl, and delete the release from its deployment directory instead", ns, name, fmt.Sprintf(format, args...))
	}
	if want := SecretName(inv.Metadata.Name, inv.Metadata.ReleaseID); name != want {
		return bad("its name should be %s for the release %q with id %s it records", want, inv.Metadata.Name, inv.Metadata.ReleaseID)
	}
	if inv.Metadata.Namespace != ns {
		return bad("it records namespace %q but is in %q", inv.Metadata.Namespace, ns)
	}
	if l := inv.labels[manifest.LabelReleaseName]; l != inv.Metadata.Name {
		return bad("label %s is %q, the metadata says %q", manifest.LabelReleaseName, l, inv.Metadata.Name)
	}
	if l := inv.labels[manifest.LabelReleaseUUID]; l != inv.Metadata.ReleaseID {
		return bad("label %s is %q, the metadata says %q", manifest.LabelReleaseUUID, l, inv.Metadata.ReleaseID)
	}
	if id, err := inv.derivedID(); err != nil {
		return bad("%v", err)
	} else if id != inv.Metadata.ReleaseID {
		return bad("it records release id %s, but release %q of module %s in namespace %q (environment %q) has id %s", inv.Metadata.ReleaseID, inv.Metadata.Name, inv.fqn(), ns, inv.Release.Environment, id)
	}
	for _, id := range inv.Index {
		c := inv.Changes[id]
		for _, e := range c.Inventory.Entries {
			if e.Namespace == ns || (c.Reach != nil && c.Reach.Allows(e)) {
				continue
			}
			where := "cluster-wide"
			if e.Namespace != "" {
				where = "in namespace " + e.Namespace
			}
			return fmt.Errorf("inventory Secret %s/%s records %s %s %s (change %s), outside its namespace and the reach it records: found by name alone, an inventory is trusted only that far; delete the release from its deployment directory (opm delete DIR --env ENV), where the environment says where it may write", ns, name, e.Kind, e.Name, where, id)
		}
	}
	return nil
}

// fqn is the module's fully qualified name as the newest change records
// it (the catalog's "<apiVersion>#<name>").
func (inv *Inventory) fqn() string {
	_, c, ok := inv.Latest()
	if !ok {
		return ""
	}
	return c.Module.Path + "#" + c.Module.Name
}

// derivedID is the release id the seeds derive for the release this
// inventory records, in the namespace it is in: UUIDv5 of the OPM
// namespace over "fqn:name:namespace[:environment]" (seed 001, 002).
func (inv *Inventory) derivedID() (string, error) {
	fqn := inv.fqn()
	if fqn == "#" || fqn == "" {
		return "", fmt.Errorf("it records no module, so its release id cannot be checked")
	}
	in := fqn + ":" + inv.Metadata.Name + ":" + inv.Release.Namespace
	if inv.Release.Environment != "" {
		in += ":" + inv.Release.Environment
	}
	return uuid.NewSHA1(opmNamespace, []byte(in)).String(), nil
}

// opmNamespace is the UUIDv5 namespace of every OPM identity
// (catalog/common.cue's _OPMNamespace).
var opmNamespace = uuid.MustParse("c1cbe76d-5687-5a47-bfe6-83b081b15413")
