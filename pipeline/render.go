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

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
)

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
	rels, err := render.Render(ctx, opts.RenderOptions(ctx))
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
