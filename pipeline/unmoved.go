package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/kube"
	"github.com/opmodel/pipeline/engine/reconcile"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/scope"
)

// fingerprints returns the input fingerprint of every selected release
// (engine/fingerprint), or nil when the deployment's syntax cannot show
// what a release reads: then every release is rendered, as before.
func fingerprints(ctx context.Context, sel Selection) map[string]string {
	ro := sel.RenderOptions(ctx)
	// The working tree, read as a review reads a side (one snapshot type).
	tree, err := worktreeTree(ctx, ro.Dir)
	if err != nil || tree.Sure() != nil {
		return nil // the render reports what is wrong
	}
	keys := ro.Releases
	if len(keys) == 0 {
		keys = tree.Releases()
	}
	in := fingerprint.Inputs{Environment: ro.Environment, ValuesFiles: ro.ValuesFiles, Values: ro.Values, Namespace: ro.Namespace}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		fp, err := tree.Of(ctx, k, in)
		if err != nil {
			return nil
		}
		out[k] = fp
	}
	return out
}

// applyUnmoved takes apply's fast path for every release it can: the
// releases' identities alone are evaluated (no values, no transformers),
// and a release whose recorded change has its fingerprint and whose
// objects nobody touched is reported unchanged without a render. rest
// are the keys that need the full apply; with done empty, every release
// does.
func applyUnmoved(ctx context.Context, opts ApplyOptions, sel Selection, fps map[string]string, ro reconcile.Options) (done []AppliedRelease, rest []string, err error) {
	ids, err := identities(ctx, sel, fps)
	if errors.Is(err, errWrongIdentity) {
		return nil, nil, err
	}
	if err != nil {
		return nil, sel.Releases, nil // the full path reports it
	}
	cls := newClusters(ctx, opts.ClusterOptions)
	for _, id := range ids {
		id.Fingerprint = fps[id.Key]
		cl, err := cls.For(ctx, id)
		if err != nil {
			rest = append(rest, id.Key)
			continue
		}
		r, ok, err := reconcile.Unmoved(ctx, cl, id, ro)
		if err != nil || !ok {
			// The full path decides, and reports what went wrong.
			rest = append(rest, id.Key)
			continue
		}
		if err := verifySkip(ctx, cl, sel, id.Key, r.ChangeID, r.ManifestDigest); err != nil {
			return nil, nil, err
		}
		id.ChangeID, id.ManifestDigest = r.ChangeID, r.ManifestDigest
		ar := AppliedRelease{RenderedRelease: newRenderedRelease(id).masked(), Operation: "apply", key: id.Key,
			Cluster: ClusterRef{Server: cl.Server, Context: cl.Context},
			Changes: reconcile.NoChanges()}
		ar.fill(r)
		done = append(done, ar)
		if opts.ReleaseDone != nil {
			opts.ReleaseDone(ar)
		}
	}
	return done, rest, nil
}

// verifySkip, with OPM_VERIFY_SKIPS set, renders release key anyway (its
// reads traced), lets cl decide its objects' scope as the full path does
// (nil: the render's own decision), and fails loudly when the result
// differs from the change a skip reported: the skip would have been
// wrong. Without it, nothing.
func verifySkip(ctx context.Context, cl *kube.Cluster, sel Selection, key, changeID, digest string) error {
	if os.Getenv(EnvVerifySkips) == "" {
		return nil
	}
	ro := sel.RenderOptions(ctx)
	ro.Releases, ro.VerifyInputs = []string{key}, true
	rels, err := render.Render(ctx, ro)
	if err != nil {
		return fmt.Errorf("%s: verifying the skip of release %s: %w", EnvVerifySkips, key, err)
	}
	if cl != nil {
		if _, err := scope.Resolve(ctx, cl.Mapper, rels[0]); err != nil {
			return fmt.Errorf("%s: verifying the skip of release %s: %w", EnvVerifySkips, key, err)
		}
	}
	if rels[0].ChangeID != changeID || rels[0].ManifestDigest != digest {
		return fmt.Errorf("%s: release %s (environment %q) was skipped as unchanged (inputs identical, recorded change %s), but it renders change %s: "+
			"the skip was wrong and no uncovered input was traced. This is a bug in opm; --no-skip renders regardless", EnvVerifySkips, key, sel.Environment, changeID, rels[0].ChangeID)
	}
	return nil
}
