package pipeline_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opmodel/pipeline/pipeline"
)

// The realistic example renders for both environments: staging without
// autoscalers, production with them.
func TestShopRendersForBothEnvironments(t *testing.T) {
	for _, envName := range []string{"staging", "production"} {
		t.Run(envName, func(t *testing.T) {
			res, err := pipeline.Render(t.Context(), pipeline.RenderOptions{Selection: pipeline.Selection{Dir: "../examples/shop", Environment: envName}})
			assert.NilError(t, err)
			y, err := res.YAML()
			assert.NilError(t, err)
			golden.Assert(t, string(y), "render/shop-"+envName+".yaml")
			hpas := strings.Count(string(y), "kind: HorizontalPodAutoscaler")
			if envName == "production" {
				assert.Equal(t, hpas, 2)
			} else {
				assert.Equal(t, hpas, 0)
			}
		})
	}
}

// shopDir copies examples/shop into a temporary directory whose production
// environment deploys into ns.
func shopDir(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir("../examples/shop", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../examples/shop", p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "deploy.cue" {
			b = []byte(strings.Replace(string(b), `namespace: "shop"`, `namespace: "`+ns+`"`, 1))
		}
		return os.WriteFile(dst, b, 0o644)
	})
	assert.NilError(t, err)
	return dir
}

func shopValues(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.cue")
	assert.NilError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

var (
	hpas         = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
)

// The whole example on the local control plane: the Certificate CRD and a
// Certificate in one apply, nothing to diff right after, an HPA pruned
// when a values change disables it, and CRD and Certificate pruned in
// reverse order when the release stops shipping them.
func TestShopAppliesDiffsCleanAndPrunes(t *testing.T) {
	ns := env.Namespace(t)
	dir := shopDir(t, ns)
	pruneCRDs := false
	apply := func(files ...string) []string {
		t.Helper()
		opts := applyOpts(dir, files...)
		opts.Environment = "production"
		opts.PruneCRDs = pruneCRDs
		var lines []string
		opts.Progress = func(e pipeline.ProgressEvent) { lines = append(lines, e.Line()) }
		_, err := pipeline.Apply(t.Context(), opts)
		assert.NilError(t, err)
		return lines
	}

	lines := apply()
	assert.Check(t, is.Contains(lines, "customresourcedefinition.apiextensions.k8s.io/certificates.cert-manager.io created"))
	assert.Check(t, is.Contains(lines, "certificate.cert-manager.io/frontend created"))
	assert.Check(t, present(t, hpas, ns, "frontend"))
	assert.Check(t, present(t, certificates, ns, "frontend"))

	cs, err := pipeline.Diff(t.Context(), pipeline.DiffOptions{Selection: pipeline.Selection{Dir: dir, Environment: "production"}, ClusterOptions: cluster(t)})
	assert.NilError(t, err)
	assert.Check(t, !cs.Counts.Changed(), "diff right after apply shows changes: %+v", cs.Counts)

	noHPA := shopValues(t, dir, "frontend: autoscaling: enabled: false\n")
	lines = apply(noHPA)
	assert.Check(t, is.Contains(lines, "horizontalpodautoscaler.autoscaling/frontend deleted"))
	assert.Check(t, !present(t, hpas, ns, "frontend"))
	assert.Check(t, present(t, hpas, ns, "api"))

	// Without --prune-crds the CRD is kept (engine/reconcile's tests), so
	// the apply that drops both the Certificate and its CRD allows it.
	noCerts := shopValues(t, dir, "frontend: autoscaling: enabled: false\ninstallCRDs: false\ntls: enabled: false\n")
	pruneCRDs = true
	lines = apply(noCerts)
	certAt := slices.Index(lines, "certificate.cert-manager.io/frontend deleted")
	crdAt := slices.Index(lines, "customresourcedefinition.apiextensions.k8s.io/certificates.cert-manager.io deleted")
	assert.Assert(t, certAt >= 0 && crdAt >= 0, "both pruned: %v", lines)
	assert.Check(t, certAt < crdAt, "the Certificate is pruned before its CRD: %v", lines)
}
