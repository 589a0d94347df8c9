// Package scope lets the cluster decide which rendered objects are
// namespaced.
//
// The render decides an object's scope without a cluster: from the
// catalog's table of built-in cluster-scoped kinds and from the
// CustomResourceDefinitions shipped in the same release. A custom resource
// whose CRD was installed some other way is assumed namespaced there. The
// API server would silently drop a namespace given to a cluster-scoped
// object, so the object's identity in the inventory, the label scan and the
// diff would no longer match what the server stores. Resolve settles this
// with the cluster's RESTMapper before anything is compared or applied, and
// then recomputes the release's digest and change ID, so what is recorded
// describes exactly what was applied.
package scope

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

// Move is one object whose namespace the cluster decided differently from
// the render.
type Move struct {
	// From is the object's identity as rendered, To as it will be applied.
	From, To manifest.ID
}

// String says what moved and why, for a release warning.
func (m Move) String() string {
	if m.To.Namespace == "" {
		return fmt.Sprintf("%s: the cluster serves %s as cluster-scoped, so it is applied without the namespace the render gave it (its CRD is not in this release; objects of this kind render namespaced)", m.From, m.From.Kind)
	}
	return fmt.Sprintf("%s: the cluster serves %s as namespaced, so it is applied in the release namespace %s", m.From, m.From.Kind, m.To.Namespace)
}

// Resolve gives every resource of rel whose kind the cluster serves the
// scope the cluster says: a namespace is cleared from a cluster-scoped
// object and the release namespace set on a namespaced one that has none.
// Kinds the cluster does not serve yet (a CRD applied by this very
// release) keep the render's decision. When anything moved, the resources
// are re-sorted and the digest and change ID recomputed.
func Resolve(ctx context.Context, mapper meta.RESTMapper, rel *render.Release) ([]Move, error) {
	var moves []Move
	for _, r := range rel.Resources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gvk := r.GVK()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("resolve the scope of %s: %w", r.ID(), err)
		}
		from := r.ID()
		ns := r.Object.GetNamespace()
		switch namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace; {
		case !namespaced && ns != "":
			r.Object.SetNamespace("")
		case namespaced && ns == "":
			r.Object.SetNamespace(rel.Namespace)
		default:
			continue
		}
		moves = append(moves, Move{From: from, To: r.ID()})
	}
	if len(moves) == 0 {
		return nil, nil
	}
	manifest.Sort(rel.Resources)
	digest, err := manifest.Digest(rel.Resources)
	if err != nil {
		return nil, fmt.Errorf("digest the manifest after resolving scopes: %w", err)
	}
	rel.ManifestDigest = digest
	rel.ChangeID = manifest.ChangeID(rel.Module.Path, rel.Module.Version, rel.ValuesText, digest)
	return moves, nil
}

// Check runs the environment's reach (render.Reach) again on the objects
// as they will be applied, once Resolve let the cluster decide their scope:
// a kind the render took for namespaced (not in the catalog's table, its
// CRD not in the release) may be cluster-scoped on the cluster, and
// applying it would create it cluster-wide. In an environment that does
// not allow cluster-scoped objects, that is a refusal, as is any object
// outside the environment's namespaces. nil when everything may be
// written.
func Check(rel *render.Release, moves []Move) error {
	if rel.Reach == nil {
		return nil
	}
	var why []string
	dropped := map[manifest.ID]Move{}
	for _, m := range moves {
		if m.To.Namespace == "" {
			dropped[m.To] = m
		}
	}
	for _, r := range rel.Resources {
		reason := rel.Reach.Check(r, rel.Namespace)
		if reason == "" {
			continue
		}
		if m, ok := dropped[r.ID()]; ok {
			reason = fmt.Sprintf("%s: the cluster serves %s as cluster-scoped, so applying it would drop the namespace %q the render gave it and create it cluster-wide, which environment %q does not allow (namespaces.clusterScoped is false)",
				m.From, m.From.Kind, m.From.Namespace, rel.Reach.Environment)
		}
		why = append(why, reason)
	}
	if len(why) == 0 {
		return nil
	}
	return fault.Validationf("release %s may not be applied: nothing was written:\n  %s", rel.Name, strings.Join(why, "\n  "))
}
