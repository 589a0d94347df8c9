// The names a deployment declares, for shell completion.

package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/load"
)

// Declared are the names a deployment directory declares, each sorted:
// what shell completion offers for --env, --group and --release.
type Declared struct {
	Environments, Groups, Releases []string
}

// DeclaredNames reads the names the deployment directory dir declares,
// with one load and no render.
func DeclaredNames(ctx context.Context, dir string) (*Declared, error) {
	d, err := load.Load(ctx, cmp.Or(dir, "."))
	if err != nil {
		return nil, err
	}
	out := &Declared{}
	envs := d.Root.LookupPath(cue.ParsePath("environments"))
	if out.Environments, err = load.FieldNames(envs); err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the environments of %s:\n%s", dir, load.Describe(err)))
	}
	for _, e := range out.Environments {
		if g, err := envs.LookupPath(cue.MakePath(cue.Str(e), cue.Str("group"))).String(); err == nil && g != "" && !slices.Contains(out.Groups, g) {
			out.Groups = append(out.Groups, g)
		}
	}
	slices.Sort(out.Groups)
	if out.Releases, err = load.FieldNames(d.Root.LookupPath(cue.ParsePath("releases"))); err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the releases of %s:\n%s", dir, load.Describe(err)))
	}
	return out, nil
}

// DeclaredEnvironments lists the environments the deployment directory
// dir declares, sorted; front doors use it to expand "all environments".
func DeclaredEnvironments(ctx context.Context, dir string) ([]string, error) {
	d, err := load.Load(ctx, cmp.Or(dir, "."))
	if err != nil {
		return nil, err
	}
	envs, err := load.FieldNames(d.Root.LookupPath(cue.ParsePath("environments")))
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading the environments of %s:\n%s", dir, load.Describe(err)))
	}
	return envs, nil
}
