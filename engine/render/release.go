package render

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/engine/values"
)

// Module describes the module a release deploys.
type Module struct {
	// Path is the module's CUE path (its metadata.apiVersion).
	Path    string `json:"path"`
	Name    string `json:"name"`
	Version string `json:"version"`
	FQN     string `json:"fqn"`
	// ID is the module identity: UUIDv5(OPM namespace, "fqn:version").
	ID string `json:"id"`
}

// Cluster is what an environment says about the cluster to deploy to.
type Cluster struct {
	KubeContext string `json:"kubeContext,omitempty"`
	KubeConfig  string `json:"kubeConfig,omitempty"`
	// ImpersonateUser and ImpersonateGroups are cluster.impersonate: the
	// identity every request is made as (a ServiceAccount becomes its user
	// name and the groups the API server gives its tokens).
	ImpersonateUser   string   `json:"impersonateUser,omitempty"`
	ImpersonateGroups []string `json:"impersonateGroups,omitempty"`
}

// Equal reports whether two releases deploy to the same cluster as the
// same identity.
func (c Cluster) Equal(o Cluster) bool {
	return c.KubeContext == o.KubeContext && c.KubeConfig == o.KubeConfig &&
		c.ImpersonateUser == o.ImpersonateUser && slices.Equal(c.ImpersonateGroups, o.ImpersonateGroups)
}

// Release is one rendered release.
type Release struct {
	// Key is the release's key in the deployment's `releases` map.
	Key       string `json:"-"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Environment is the environment name, empty when none was used.
	Environment string `json:"environment,omitempty"`
	// Cluster is the environment's cluster, zero when it names none.
	Cluster Cluster `json:"-"`
	// Reach is where the environment lets the release write; nil without
	// an environment.
	Reach *Reach `json:"-"`
	// ReleaseID is UUIDv5(OPM namespace, "fqn:name:namespace[:env]").
	ReleaseID string `json:"releaseId"`
	Module    Module `json:"module"`
	// Values are the resolved values as JSON (for machines) and as CUE
	// text (the change ID input, stored in the inventory).
	// Values from a secret source (SOPS, a secret input), and what a
	// secret reaches, are masked in both; Secrets holds the secret values
	// and what they derive into, for redacting free text (errors, logs).
	Values     json.RawMessage `json:"values"`
	ValuesText string          `json:"-"`
	Secrets    []string        `json:"-"`
	// SecretFields lists, per object of Resources (same index), the
	// fields a secret reaches, found by rendering again with stand-ins
	// (engine/taint); nil when the release has no secret source. A v1
	// Secret's data is secret whether listed or not.
	SecretFields [][]taint.Field `json:"-"`
	// Resources are in apply order.
	Resources      []manifest.Resource `json:"-"`
	ManifestDigest string              `json:"manifestDigest"`
	ChangeID       string              `json:"changeId"`
	// Warnings are what the render wants a reviewer to know.
	Warnings []string `json:"warnings,omitempty"`
	// Fingerprint is the render's input fingerprint, when the caller
	// computed one (engine/fingerprint); apply records it.
	Fingerprint string `json:"-"`

	// set is where each value came from, for tracing a rejected value
	// back to its source (ValueSources).
	set *values.Set
}

// ValueSources names the values that set text, with their sources
// ("values.memory, from environment "staging" at env.cue:12:14"), so an
// API server's refusal of a value can say what to change and where.
// Secret values are never named.
func (r *Release) ValueSources(text string) []string {
	if r.set == nil || text == "" {
		return nil
	}
	var out []string
	for _, o := range r.set.Find(text) {
		out = append(out, "values."+strings.Join(o.Path, ".")+", from "+o.String())
	}
	return out
}

// Sensitive reports whether the release's digest and change ID depend on
// secret data (a Secret object's data, or values from a secret source):
// public outputs seal them (manifest.Sealer).
func (r *Release) Sensitive() bool {
	return len(r.Secrets) > 0 || manifest.HoldsSecretData(r.Resources)
}
