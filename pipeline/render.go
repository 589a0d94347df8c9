// Package pipeline holds the operations every front door calls — the opm
// CLI, the GitHub Action and the Dagger module. Options are typed, results
// are JSON-serialisable, and no front door holds logic of its own: what a
// user can do through one door, they can do through the others.
//
//   - reading a deployment: Render, Explain (what a fingerprint covers),
//     DeclaredNames, DeclaredEnvironments, Fleet and PlanFleet (groups and
//     waves), RBAC (the least privilege a release needs);
//   - comparing: Diff (against the cluster, drift included), Review (two
//     commits), PlanReview, ReviewShard and MergeReviews (a review in
//     shards);
//   - changing the cluster: Deploy (how every front door applies: one
//     environment through Apply, a fleet through Rollout, in waves, gated),
//     Prune, Delete, Rollback and RollbackFleet, Smoke (in a throwaway
//     namespace), Repair (an inventory), Unlock (a release lock);
//   - reading the cluster: Status, History, Gates (does a gating
//     environment run a commit healthy);
//   - what the front doors share around those, so none reads its inputs
//     its own way: BaseRef (a review's base, with its remote-tracking
//     fallback), ParseShard, ReadSplit and MergeReviewFiles (a review's
//     shard files), Actor (who a change record names), NewSealer (sealed
//     identifiers), ContainerKubeconfig (a cluster reached from a
//     container), DefaultTakeOver (the take-over set apply's help
//     prints) and SmokeSteps (the steps a smoke report lists).
//
// Data flows one way: front door → pipeline → engine → Kubernetes.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/values"
)

// Selection says which releases of which deployment directory, in which
// environment, with which extra values files.
type Selection struct {
	// Dir is the deployment directory (a CUE module); default ".".
	Dir string `json:"dir"`
	// Environment selects `environments[Environment]`; empty renders releases as written.
	// Operations that take a fleet (Fleet, Rollout) also read a group
	// name or a comma list here.
	Environment string `json:"environment,omitempty"`
	// Group selects every environment of a group (Fleet, Rollout).
	Group string `json:"group,omitempty"`
	// Releases selects releases by key; empty selects all.
	Releases []string `json:"releases,omitempty"`
	// ValuesFiles are merged last (release < environment < files), one release only.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// NamespaceOverride replaces every selected release's namespace (and
	// so its identity); Smoke sets it to a throwaway namespace.
	NamespaceOverride string `json:"namespaceOverride,omitempty"`
	// InlineValues are values files handed over in memory that are not
	// secret (the CLI's `-f -`, read from standard input), merged after
	// ValuesFiles, one release only.
	InlineValues []InlineValues `json:"-"`
	// SecretValues are values files handed over in memory (a CI or Dagger
	// secret), plaintext or SOPS-encrypted, merged after ValuesFiles, one
	// release only. Their values are secret: masked wherever values are
	// shown, never written to disk.
	SecretValues []SecretValues `json:"-"`
	// AgeKeys are age secret keys that open SOPS-encrypted values files,
	// tried before the sops CLI's places (SOPS_AGE_KEY, …).
	AgeKeys []string `json:"-"`
}

// InlineValues is one in-memory values file that is not secret.
type InlineValues struct {
	// Name is what messages call it; its extension picks the format
	// (stdin.cue), else JSON or YAML by content.
	Name string
	Data []byte
}

// SecretValues is one in-memory values file.
type SecretValues struct {
	// Name is what messages call it (e.g. `values-secret`), never a path.
	Name string
	Data []byte
}

// dir is the deployment directory, "." when none was given.
func (s Selection) dir() string {
	if s.Dir == "" {
		return "."
	}
	return s.Dir
}

// renderOptions are the render's options for the selection; the loads of
// the operation ctx carries (withLoads) are shared.
func (s Selection) renderOptions(ctx context.Context) render.Options {
	dir := s.dir()
	o := render.Options{Dir: dir, Environment: s.Environment, Releases: s.Releases, ValuesFiles: s.ValuesFiles, Namespace: s.NamespaceOverride,
		Keys: encrypted.Keys{AgeIdentities: s.AgeKeys}, VerifyInputs: os.Getenv(EnvVerifyInputs) != "", Loads: loadsOf(ctx)}
	o.Cache, o.VerifyCache = transformsOf(ctx), os.Getenv(EnvVerifySkips) != ""
	for _, v := range s.InlineValues {
		o.Values = append(o.Values, values.Input{Name: v.Name, Data: v.Data})
	}
	for _, v := range s.SecretValues {
		o.Values = append(o.Values, values.Input{Name: v.Name, Data: v.Data, Secret: true})
	}
	return o
}

// EnvVerifyInputs, set to anything, makes every render trace the files it
// reads and fail when one is not covered by the input fingerprints (see
// docs/incremental.md); the tests run with it.
const EnvVerifyInputs = "OPM_VERIFY_INPUTS"

// EnvVerifySkips, set to anything, makes apply, diff and review render
// what they would skip as well and fail loudly when the skip would have
// been wrong (Go's GODEBUG=gocacheverify, for renders).
const EnvVerifySkips = "OPM_VERIFY_SKIPS"

// RenderOptions are the options of Render.
type RenderOptions struct {
	Selection
}

// RenderResult is what Render returns; its JSON form is the machine
// interface `opm render -o json` prints and the Action and Dagger reuse.
type RenderResult struct {
	Releases []RenderedRelease `json:"releases"`
}

// RenderedRelease is one rendered release with its objects in apply order.
// ValuesText is the resolved values as the CUE text the change ID hashes,
// so the change ID can be recomputed from this output alone, like the
// manifest digest from Resources.
type RenderedRelease struct {
	Name           string           `json:"name"`
	Namespace      string           `json:"namespace"`
	Environment    string           `json:"environment"`
	ReleaseID      string           `json:"releaseId"`
	ModuleID       string           `json:"moduleId"`
	Module         ModuleRef        `json:"module"`
	Values         json.RawMessage  `json:"values"`
	ValuesText     string           `json:"valuesText"`
	ManifestDigest string           `json:"manifestDigest"`
	ChangeID       string           `json:"changeId"`
	Resources      []map[string]any `json:"resources"`
	// Warnings are the render's own (for example a CUE workaround used).
	Warnings []string `json:"warnings,omitempty"`
	// Sensitive: the digest and change ID depend on secret data (Secret
	// objects, values from a secret source); public outputs seal them.
	Sensitive bool `json:"sensitive,omitempty"`
	// Wave is the environment's rollout wave, when a fleet was rendered
	// (wave 0 included); nil otherwise.
	Wave *int `json:"wave,omitempty"`

	release *render.Release
}

// ModuleRef names the module a release deploys.
type ModuleRef struct {
	Path    string `json:"path"`
	Name    string `json:"name"`
	Version string `json:"version"`
	FQN     string `json:"fqn"`
}

// Render renders the selected releases.
func Render(ctx context.Context, opts RenderOptions) (*RenderResult, error) {
	return routed(ctx, opts.Selection,
		func() (*RenderResult, error) { return renderEnvironment(ctx, opts) },
		func(envs []FleetEnvironment) (*RenderResult, error) { return renderFleet(ctx, opts, envs) })
}

// renderEnvironment is Render in one environment (or none).
func renderEnvironment(ctx context.Context, opts RenderOptions) (*RenderResult, error) {
	rels, err := render.Render(ctx, opts.renderOptions(ctx))
	if err != nil {
		return nil, err
	}
	res := &RenderResult{Releases: make([]RenderedRelease, 0, len(rels))}
	for _, r := range rels {
		res.Releases = append(res.Releases, newRenderedRelease(r))
	}
	return res, nil
}

func newRenderedRelease(r *render.Release) RenderedRelease {
	out := RenderedRelease{
		Name: r.Name, Namespace: r.Namespace, Environment: r.Environment,
		ReleaseID: r.ReleaseID, ModuleID: r.Module.ID,
		Module:         ModuleRef{Path: r.Module.Path, Name: r.Module.Name, Version: r.Module.Version, FQN: r.Module.FQN},
		Values:         r.Values,
		ValuesText:     r.ValuesText,
		ManifestDigest: r.ManifestDigest, ChangeID: r.ChangeID,
		Resources: make([]map[string]any, 0, len(r.Resources)),
		Warnings:  r.Warnings,
		Sensitive: r.Sensitive(),
		release:   r,
	}
	for _, res := range r.Resources {
		out.Resources = append(out.Resources, res.Object.Object)
	}
	return out
}

// YAML returns the manifests of every release as one multi-document
// stream in apply order.
func (r *RenderResult) YAML() ([]byte, error) {
	var b bytes.Buffer
	for _, rel := range r.Releases {
		for _, obj := range rel.Resources {
			y, err := manifest.YAML(obj)
			if err != nil {
				return nil, fmt.Errorf("encoding %s/%v as YAML: %w", rel.Name, obj["kind"], err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
	}
	return b.Bytes(), nil
}

// transformsKey carries the cache an operation's renders keep their
// components' transforms in.
type transformsKey struct{}

// withTransforms returns ctx whose renders keep their components'
// transforms in c; nil keeps none (--no-skip, --no-cache).
func withTransforms(ctx context.Context, c *cache.Cache) context.Context {
	return context.WithValue(ctx, transformsKey{}, c)
}

// transformsOf is the cache ctx's renders keep transforms in: the one
// withTransforms set, else the user's cache (OPM_CACHE_DIR, OPM_CACHE_KEY).
func transformsOf(ctx context.Context) *cache.Cache {
	if c, ok := ctx.Value(transformsKey{}).(*cache.Cache); ok {
		return c
	}
	return openCache("", nil)
}

// loadsKey carries an operation's load memo in its context.
type loadsKey struct{}

// withLoads returns ctx carrying a load memo for one operation on one
// environment: its steps (the fast path's identities, the render after
// it) load the deployment once. Never wider than that: a loaded
// deployment is one CUE context, which one goroutine uses at a time, and a
// rollout's environments run in parallel, each with its own.
func withLoads(ctx context.Context) context.Context {
	return context.WithValue(ctx, loadsKey{}, load.NewMemo())
}

// loadsOf is the load memo ctx carries, or nil (every render loads).
func loadsOf(ctx context.Context) *load.Memo {
	m, _ := ctx.Value(loadsKey{}).(*load.Memo)
	return m
}
