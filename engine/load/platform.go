package load

import (
	"context"
	"fmt"
	"os"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/mod/module"

	"github.com/opmodel/pipeline/engine/fault"
)

// platformRoot is the synthetic module that imports a subscribed catalog
// at its pinned version; nothing is written there.
const platformRoot = "/__opm_platform__"

// Published loads the root package of the CUE module path at exactly
// version (bare SemVer, as a platform's subscription names it) from the
// registry (CUE_REGISTRY, its cache and logins), into cctx: a v2 platform's
// catalog, fetched as upstream's runtime fetches it, whatever version the
// deployment's own module graph would pick.
func Published(ctx context.Context, cctx *cue.Context, path, version string) (cue.Value, error) {
	mv, err := module.NewVersion(path, "v"+strings.TrimPrefix(version, "v"))
	if err != nil {
		return cue.Value{}, fault.Validationf("platform subscription %q version %q: %v", path, version, err)
	}
	base, _, _ := strings.Cut(path, "@")
	modFile := fmt.Sprintf("module: \"opm.internal/platform@v0\"\nlanguage: version: \"v0.12.0\"\ndeps: %q: v: %q\n", mv.Path(), mv.Version())
	src := fmt.Sprintf("package platform\n\nimport catalog %q\n\nroot: catalog\n", path)
	reg, err := newRegistry(os.Environ())
	if err != nil {
		return cue.Value{}, err
	}
	cfg := &load.Config{Dir: platformRoot, ModuleRoot: platformRoot, Registry: reg, FS: newLoaderFS(map[string][]byte{
		platformRoot + "/cue.mod/module.cue": []byte(modFile),
		platformRoot + "/platform.cue":       []byte(src),
	}, FilesOf(ctx))}
	insts := load.Instances([]string{"."}, cfg)
	if len(insts) != 1 || insts[0].Err != nil {
		var cause error
		if len(insts) == 1 {
			cause = insts[0].Err
		}
		return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("platform catalog %s at %s (%s): %s", path, version, base, Describe(cause)))
	}
	v := cctx.BuildInstance(insts[0])
	if err := v.Err(); err != nil {
		return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("platform catalog %s at %s:\n%s", path, version, Describe(err)))
	}
	return v.LookupPath(cue.ParsePath("root")), nil
}
