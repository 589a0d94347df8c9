package inventory

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
)

// ConflictError says the Secret changed between read and write: another
// apply (or prune) of the same release ran concurrently. Nothing was written.
type ConflictError struct {
	Namespace, Name string
	Err             error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("inventory Secret %s/%s was changed by another apply of this release while this one ran; "+
		"the inventory was not written: re-run the command", e.Namespace, e.Name)
}

func (e *ConflictError) Unwrap() error { return e.Err }

// Read returns the release's inventory: a GET by name, then a list by the
// release-uuid label (for a Secret named by an older convention). It
// returns nil and no error when the release has none.
func Read(ctx context.Context, cs kubernetes.Interface, rel Release) (*Inventory, error) {
	name := SecretName(rel.Name, rel.ReleaseID)
	secrets := cs.CoreV1().Secrets(rel.Namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return decodeFor(ctx, s, rel)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read inventory Secret %s/%s: %w", rel.Namespace, name, err)
	}
	sel := labels.Set{manifest.LabelReleaseUUID: rel.ReleaseID, LabelComponent: ComponentInventory}.String()
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list inventory Secrets in %s with %s: %w", rel.Namespace, sel, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return decodeFor(ctx, &list.Items[0], rel)
	default:
		names := make([]string, 0, len(list.Items))
		for _, it := range list.Items {
			names = append(names, it.Name)
		}
		return nil, fmt.Errorf("release %s has %d inventory Secrets in %s (%v); delete all but one", rel.Name, len(names), rel.Namespace, names)
	}
}

func decodeFor(ctx context.Context, sec *corev1.Secret, rel Release) (*Inventory, error) {
	inv, err := Decode(sec)
	if err != nil {
		registerCorrupt(ctx, sec)
		return nil, err
	}
	register(ctx, inv)
	if inv.Metadata.ReleaseID != "" && inv.Metadata.ReleaseID != rel.ReleaseID {
		return nil, fmt.Errorf("inventory Secret %s/%s belongs to release id %s, not %s", sec.Namespace, sec.Name, inv.Metadata.ReleaseID, rel.ReleaseID)
	}
	// The release as rendered now is authoritative for labels and metadata.
	inv.Release = rel
	inv.Metadata.Name, inv.Metadata.Namespace, inv.Metadata.ReleaseID = rel.Name, rel.Namespace, rel.ReleaseID
	inv.Metadata.Kind, inv.Metadata.APIVersion = MetadataKind, MetadataAPIVersion
	return inv, nil
}

// Write stores inv with a full PUT carrying the resourceVersion it was
// read with, or creates it when it was never stored. A concurrent change
// is a *ConflictError. On success inv takes the new resourceVersion, so it
// can be written again.
func Write(ctx context.Context, cs kubernetes.Interface, inv *Inventory) error {
	s, err := inv.Encode()
	if err != nil {
		return err
	}
	secrets := cs.CoreV1().Secrets(inv.Namespace())
	if inv.resourceVersion == "" {
		out, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return &ConflictError{Namespace: s.Namespace, Name: s.Name, Err: err}
		}
		if err != nil {
			return fmt.Errorf("create inventory Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		inv.resourceVersion = out.ResourceVersion
		return nil
	}
	out, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// NotFound: someone deleted it since we read it; recreating it
		// would silently drop their intent.
		return &ConflictError{Namespace: s.Namespace, Name: s.Name, Err: err}
	}
	if err != nil {
		return fmt.Errorf("update inventory Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	inv.resourceVersion = out.ResourceVersion
	return nil
}

// Delete removes the inventory Secret, only if it is still the version
// that was read. A Secret already gone counts as deleted.
func Delete(ctx context.Context, cs kubernetes.Interface, inv *Inventory) error {
	opts := metav1.DeleteOptions{}
	if rv := inv.resourceVersion; rv != "" {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	err := cs.CoreV1().Secrets(inv.Namespace()).Delete(ctx, inv.name, opts)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return &ConflictError{Namespace: inv.Namespace(), Name: inv.name, Err: err}
	default:
		return fmt.Errorf("delete inventory Secret %s/%s: %w", inv.Namespace(), inv.name, err)
	}
}

// Backup copies a Secret's data into a new Secret beside it, named
// <name>.backup-<unix seconds>, so a repair never loses what it replaced.
// The copy carries only opmodel.dev/component: inventory-backup (not the
// release's labels, so it is never mistaken for an inventory or an object
// of the release) and says where it came from in annotations.
func Backup(ctx context.Context, cs kubernetes.Interface, s *corev1.Secret, now time.Time) (*corev1.Secret, error) {
	b := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s.backup-%d", s.Name, now.Unix()), Namespace: s.Namespace,
			Labels: map[string]string{manifest.LabelManagedBy: manifest.ManagedByOPM, LabelComponent: ComponentBackup},
			Annotations: map[string]string{
				AnnotationBackupOf: s.Name, AnnotationBackupType: string(s.Type), AnnotationBackupVersion: s.ResourceVersion,
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: s.Data,
	}
	out, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, b, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("back up inventory Secret %s/%s as %s: %w", s.Namespace, s.Name, b.Name, err)
	}
	return out, nil
}

// Rebuilt is a fresh inventory for rel that replaces the stored Secret old
// (corrupt, or being rebuilt): written with old's name and resourceVersion,
// so a concurrent change still fails the write.
func Rebuilt(rel Release, old *corev1.Secret) *Inventory {
	inv := New(rel)
	if old != nil {
		inv.name, inv.resourceVersion = old.Name, old.ResourceVersion
	}
	return inv
}

// Raw returns the release's stored inventory Secret, undecoded (nil when
// there is none): by name, then by the release-uuid label.
func Raw(ctx context.Context, cs kubernetes.Interface, rel Release) (*corev1.Secret, error) {
	secrets := cs.CoreV1().Secrets(rel.Namespace)
	name := SecretName(rel.Name, rel.ReleaseID)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return s, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read inventory Secret %s/%s: %w", rel.Namespace, name, err)
	}
	sel := labels.Set{manifest.LabelReleaseUUID: rel.ReleaseID, LabelComponent: ComponentInventory}.String()
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list inventory Secrets in %s with %s: %w", rel.Namespace, sel, err)
	}
	if len(list.Items) != 1 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// register tells the context's redactor (engine/redact) what of inv must
// not be published: the identifiers of changes that hold secrets, and the
// names of objects that carried one.
func register(ctx context.Context, inv *Inventory) {
	red := redact.From(ctx)
	if red == nil || inv == nil {
		return
	}
	for _, id := range inv.Index {
		c, ok := inv.Changes[id]
		if !ok || !c.HoldsSecrets() {
			continue
		}
		red.Sensitive(c.ManifestDigest, id)
		for _, e := range c.Inventory.Entries {
			if e.SecretName {
				red.Name(e.Name)
			}
		}
	}
}

// registerCorrupt seals every change ID of an inventory that cannot be
// decoded: nothing says which changes held secrets, and the error names
// the key at fault.
func registerCorrupt(ctx context.Context, sec *corev1.Secret) {
	red := redact.From(ctx)
	for k := range sec.Data {
		if strings.HasPrefix(k, "change-") {
			red.Sensitive("", k)
		}
	}
}
