package pipeline

import "github.com/opmodel/pipeline/pipeline/operation"

// What every operation starts from (pipeline/operation), under the names
// the front doors use.
type (
	// Selection says which releases of which deployment directory, in
	// which environment, with which extra values files.
	Selection = operation.Selection
	// InlineValues is one in-memory values file that is not secret.
	InlineValues = operation.InlineValues
	// SecretValues is one in-memory values file whose values are secret.
	SecretValues = operation.SecretValues
	// Protection lifts apply's protection of stale Namespaces, PVCs and
	// CRDs.
	Protection = operation.Protection
)

// The environment variables every operation reads (see operation).
const (
	EnvVerifyInputs  = operation.EnvVerifyInputs
	EnvVerifySkips   = operation.EnvVerifySkips
	EnvCacheDir      = operation.EnvCacheDir
	EnvCacheKey      = operation.EnvCacheKey
	EnvCacheMaxBytes = operation.EnvCacheMaxBytes
)
