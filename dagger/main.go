// The opm Dagger module: render, review, diff, apply, prune, inspect and
// delete OPM releases from any Dagger pipeline.
//
// Every function is a thin adapter over the github.com/opmodel/pipeline
// package, the same one the opm CLI and the GitHub Action call: it copies
// the source directory and values files into the module's container, reads
// the kubeconfig secret into memory (never onto disk, never into a log),
// calls one pipeline operation and maps its result to fields. All logic and
// its tests live in pipeline.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"dagger/opm/internal/dagger"

	"github.com/opmodel/pipeline/pipeline"
)

// Opm holds what every function needs: the deployment directory and, for
// the functions that reach a cluster, a kubeconfig and context.
type Opm struct {
	// Source holds the deployment directory (a CUE module).
	Source *dagger.Directory
	// Path is the deployment directory inside Source.
	Path string
	// +private
	Kubeconfig *dagger.Secret
	// Context overrides every environment's kubeContext.
	Context string
}

func New(
	// The repository or directory holding the deployment directory.
	// +defaultPath="/"
	// +ignore=[".git", "bin", "**/node_modules"]
	source *dagger.Directory,
	// The deployment directory inside source.
	// +optional
	// +default="."
	path string,
	// A kubeconfig, e.g. file://$HOME/.kube/config or env://KUBECONFIG_DATA.
	// An environment's kubeContext is selected inside it, never replaced.
	// +optional
	kubeconfig *dagger.Secret,
	// A context overriding every environment's kubeContext.
	// +optional
	context string,
) *Opm {
	return &Opm{Source: source, Path: path, Kubeconfig: kubeconfig, Context: context}
}

// Release is one rendered release.
type Release struct {
	Name        string
	Namespace   string
	Environment string
	ReleaseId   string
	ModuleId    string
	Digest      string
	ChangeId    string
}

// RenderResult is the result of Render.
type RenderResult struct {
	Releases []*Release
	// Digest is the manifest digest (combined over releases when several).
	Digest string
	// ChangeId is the change ID (combined over releases when several).
	ChangeId string
	// ReleaseId is set when one release was rendered.
	ReleaseId string
	// Json is `opm render -o json`.
	Json string
	// +private
	ManifestsYaml string
}

// Manifests is every release's manifests as one YAML stream in apply order.
func (r *RenderResult) Manifests() *dagger.File {
	return dag.File("manifests.yaml", r.ManifestsYaml)
}

// Render renders the releases of the deployment directory.
func (m *Opm) Render(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// Values files (CUE, JSON or YAML) merged last; need exactly one release.
	// +optional
	values []*dagger.File,
) (*RenderResult, error) {
	sel, err := m.selection(ctx, env, releases, values)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Render(ctx, pipeline.RenderOptions{Selection: sel})
	if err != nil {
		return nil, err
	}
	y, err := res.YAML()
	if err != nil {
		return nil, err
	}
	out := &RenderResult{Digest: res.Digest(), ChangeId: res.ChangeID(), ReleaseId: res.ReleaseID(), Json: jsonOf(res), ManifestsYaml: string(y)}
	for _, r := range res.Releases {
		out.Releases = append(out.Releases, &Release{Name: r.Name, Namespace: r.Namespace, Environment: r.Environment,
			ReleaseId: r.ReleaseID, ModuleId: r.ModuleID, Digest: r.ManifestDigest, ChangeId: r.ChangeID})
	}
	return out, nil
}

// ChangesResult is the result of Diff and Review.
type ChangesResult struct {
	// HasChanges is true when anything would be added, modified or pruned.
	HasChanges bool
	// Stale lists what apply would prune ("release: kind/namespace/name").
	Stale []string
	// Markdown is the pull-request comment body; Text the terminal form.
	Markdown string
	Text     string
	Json     string
}

func changes(cs *pipeline.ChangeSet) *ChangesResult {
	return &ChangesResult{HasChanges: cs.Counts.Changed(), Stale: cs.StaleObjects(),
		Markdown: cs.Markdown(pipeline.MarkdownOptions{}), Text: cs.Text(false), Json: jsonOf(cs)}
}

// Review compares the deployment directory with its version in base,
// without a cluster: objects added, modified and stale per release.
func (m *Opm) Review(
	ctx context.Context,
	// The same repository at the base ref.
	base *dagger.Directory,
	// +optional
	env string,
	// +optional
	releases []string,
) (*ChangesResult, error) {
	sel, err := m.selection(ctx, env, releases, nil)
	if err != nil {
		return nil, err
	}
	baseRoot, err := export(ctx, base, "base")
	if err != nil {
		return nil, err
	}
	cs, err := pipeline.Review(ctx, pipeline.ReviewOptions{Selection: sel, BaseDir: filepath.Join(baseRoot, m.Path)})
	if err != nil {
		return nil, err
	}
	return changes(cs), nil
}

// Diff compares the rendered releases with the cluster.
// +cache="never"
func (m *Opm) Diff(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	values []*dagger.File,
) (*ChangesResult, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, values)
	if err != nil {
		return nil, err
	}
	cs, err := pipeline.Diff(ctx, pipeline.DiffOptions{Selection: sel, ClusterOptions: co})
	if cs == nil {
		return nil, err
	}
	return changes(cs), err
}

// ApplyResult is the result of Apply and Prune.
type ApplyResult struct {
	// Summary is one line per release (counts, digest, change id, inventory).
	Summary string
	// Pruned lists what was deleted ("release: kind/namespace/name").
	Pruned []string
	Json   string
}

// Apply applies the releases with server-side apply, prunes what they no
// longer render, and records the inventory.
// +cache="never"
func (m *Opm) Apply(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// +optional
	noPrune bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// +optional
	force bool,
	// +optional
	adopt bool,
	// Also prune ghosts: objects carrying the release's id that it neither
	// records nor renders.
	// +optional
	pruneGhosts bool,
	// +optional
	// +default=10
	maxHistory int,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (*ApplyResult, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, values)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Apply(ctx, pipeline.ApplyOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun, NoPrune: noPrune,
		Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs}, Force: force, Adopt: adopt, MaxHistory: maxHistory,
		PruneGhosts: pruneGhosts, Locking: lk})
	return applied(res, err)
}

// Prune deletes what the releases no longer render, without applying.
// +cache="never"
func (m *Opm) Prune(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// +optional
	force bool,
	// Also prune ghosts: objects carrying the release's id that it neither
	// records nor renders.
	// +optional
	ghosts bool,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (*ApplyResult, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, values)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Prune(ctx, pipeline.PruneOptions{Selection: sel, ClusterOptions: co, DryRun: dryRun,
		Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs}, Force: force, Ghosts: ghosts, Locking: lk})
	return applied(res, err)
}

func applied(res *pipeline.ApplyResult, err error) (*ApplyResult, error) {
	if res == nil {
		return nil, err
	}
	return &ApplyResult{Summary: res.Summary(), Pruned: res.PrunedObjects(), Json: jsonOf(res)}, err
}

// StatusResult is the result of Status.
type StatusResult struct {
	Healthy bool
	Table   string
	Json    string
}

// Status reports the health of the releases' objects; with wait, it
// waits until all are ready or one fails.
// +cache="never"
func (m *Opm) Status(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	wait bool,
	// +optional
	// +default="5m"
	timeout string,
) (*StatusResult, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, nil)
	if err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Status(ctx, pipeline.StatusOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co, Wait: wait, Timeout: d})
	if res == nil {
		return nil, err
	}
	return &StatusResult{Healthy: res.Healthy, Table: res.Table(), Json: jsonOf(res)}, err
}

// DeleteResult is the result of Delete.
type DeleteResult struct {
	Summary string
	Json    string
}

// Delete removes the releases' objects, then their inventory.
// +cache="never"
func (m *Opm) Delete(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	dryRun bool,
	// +optional
	wait bool,
	// +optional
	pruneNamespaces bool,
	// +optional
	prunePvcs bool,
	// Who this run is, shown to runs waiting for the release's lock (e.g.
	// the CI run URL); default "dagger opm module on <container>".
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock ("0":
	// fail at once).
	// +optional
	// +default="5m"
	lockTimeout string,
) (*DeleteResult, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, nil)
	if err != nil {
		return nil, err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := pipeline.Delete(ctx, pipeline.DeleteOptions{Target: pipeline.Target{Selection: sel}, ClusterOptions: co,
		DryRun: dryRun, Wait: wait, Protection: pipeline.Protection{PruneNamespaces: pruneNamespaces, PrunePVCs: prunePvcs}, Locking: lk})
	if res == nil {
		return nil, err
	}
	return &DeleteResult{Summary: res.Summary(), Json: jsonOf(res)}, err
}

// Repair rebuilds the releases' inventories from their labelled objects
// and their render, keeping the old data in a backup Secret.
// +cache="never"
func (m *Opm) Repair(
	ctx context.Context,
	// +optional
	env string,
	// +optional
	releases []string,
	// +optional
	values []*dagger.File,
	// +optional
	dryRun bool,
	// Who this run is, shown to runs waiting for the release's lock.
	// +optional
	holder string,
	// How long to wait while another run holds the release's lock.
	// +optional
	// +default="5m"
	lockTimeout string,
) (string, error) {
	sel, co, err := m.clusterInputs(ctx, env, releases, values)
	if err != nil {
		return "", err
	}
	lk, err := locking(holder, lockTimeout)
	if err != nil {
		return "", err
	}
	res, err := pipeline.Repair(ctx, pipeline.RepairOptions{Selection: sel, ClusterOptions: co, Locking: lk, DryRun: dryRun})
	if res == nil {
		return "", err
	}
	return jsonOf(res), err
}

// Unlock breaks a release's lock by hand and says who held it.
// +cache="never"
func (m *Opm) Unlock(
	ctx context.Context,
	// The release's name.
	name string,
	// The release's namespace.
	namespace string,
	// The release id, when several releases share the name.
	// +optional
	releaseId string,
) (string, error) {
	co, err := m.cluster(ctx)
	if err != nil {
		return "", err
	}
	res, err := pipeline.Unlock(ctx, pipeline.UnlockOptions{ClusterOptions: co, Namespace: namespace, Name: name, ReleaseID: releaseId})
	if err != nil {
		return "", err
	}
	if !res.Held {
		return fmt.Sprintf("release %s in %s is not locked", name, namespace), nil
	}
	return fmt.Sprintf("unlocked: Lease %s/%s was held by %s", namespace, res.Lease, res.Holder), nil
}

// locking is the release lock's options: the holder names this Dagger
// run (the container's hostname is unique to the function call) unless
// the caller passes its own identity, such as a CI run URL.
func locking(holder, timeout string) (pipeline.Locking, error) {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return pipeline.Locking{}, fmt.Errorf("lockTimeout %q: %w", timeout, err)
	}
	if holder == "" {
		host, _ := os.Hostname()
		holder = "dagger opm module on " + host
	}
	return pipeline.Locking{Holder: holder, LockTimeout: d, NoLockWait: d == 0}, nil
}

// selection materialises the source and values files in the container.
func (m *Opm) selection(ctx context.Context, env string, releases []string, values []*dagger.File) (pipeline.Selection, error) {
	root, err := export(ctx, m.Source, "source")
	if err != nil {
		return pipeline.Selection{}, err
	}
	sel := pipeline.Selection{Dir: filepath.Join(root, m.Path), Environment: env, Releases: releases}
	if len(values) == 0 {
		return sel, nil
	}
	dir, err := os.MkdirTemp("", "opm-values-")
	if err != nil {
		return sel, err
	}
	for i, f := range values {
		name, err := f.Name(ctx)
		if err != nil {
			return sel, err
		}
		// Numbered so two files with one name keep their order and both.
		p := filepath.Join(dir, fmt.Sprintf("%02d-%s", i, name))
		if _, err := f.Export(ctx, p); err != nil {
			return sel, err
		}
		sel.ValuesFiles = append(sel.ValuesFiles, p)
	}
	return sel, nil
}

// clusterInputs is selection and cluster together, for the functions that
// reach a cluster.
func (m *Opm) clusterInputs(ctx context.Context, env string, releases []string, values []*dagger.File) (pipeline.Selection, pipeline.ClusterOptions, error) {
	sel, err := m.selection(ctx, env, releases, values)
	if err != nil {
		return sel, pipeline.ClusterOptions{}, err
	}
	co, err := m.cluster(ctx)
	return sel, co, err
}

// cluster reads the kubeconfig secret into memory only.
func (m *Opm) cluster(ctx context.Context) (pipeline.ClusterOptions, error) {
	co := pipeline.ClusterOptions{Context: m.Context}
	if m.Kubeconfig == nil {
		return co, nil
	}
	data, err := m.Kubeconfig.Plaintext(ctx)
	if err != nil {
		return co, err
	}
	co.KubeconfigData = []byte(data)
	return co, nil
}

func export(ctx context.Context, dir *dagger.Directory, name string) (string, error) {
	root, err := os.MkdirTemp("", "opm-"+name+"-")
	if err != nil {
		return "", err
	}
	if _, err := dir.Export(ctx, root); err != nil {
		return "", err
	}
	return root, nil
}

func jsonOf(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}
