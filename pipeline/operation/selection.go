package operation

import (
	"context"
	"os"
	"strings"

	"github.com/opmodel/pipeline/engine/encrypted"
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

// DirOrDot is the deployment directory, "." when none was given.
func (s Selection) DirOrDot() string {
	if s.Dir == "" {
		return "."
	}
	return s.Dir
}

// RenderOptions are the render's options for the selection; the loads of
// the operation ctx carries (WithLoads) are shared.
func (s Selection) RenderOptions(ctx context.Context) render.Options {
	dir := s.DirOrDot()
	o := render.Options{Dir: dir, Environment: s.Environment, Releases: s.Releases, ValuesFiles: s.ValuesFiles, Namespace: s.NamespaceOverride,
		Keys: encrypted.Keys{AgeIdentities: s.AgeKeys}, VerifyInputs: os.Getenv(EnvVerifyInputs) != "", Loads: LoadsOf(ctx)}
	o.Cache, o.VerifyCache = TransformsOf(ctx), os.Getenv(EnvVerifySkips) != ""
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

// ForEnvironment returns the selection narrowed to one environment.
func (s Selection) ForEnvironment(env string) Selection {
	s.Environment, s.Group = env, ""
	return s
}

// IsFleet reports whether the selection may name more than one
// environment (a group, a comma list).
func (s Selection) IsFleet() bool { return s.Group != "" || strings.Contains(s.Environment, ",") }
