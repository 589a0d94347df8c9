package values

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/encoding/yaml"
)

// ReadFile reads a values file (CUE, JSON or YAML holding one struct) into
// a set whose source is the file's path.
func ReadFile(cctx *cue.Context, path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading values file: %w", err)
	}
	source := fmt.Sprintf("file %q", path)
	var v cue.Value
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		f, err := yaml.Extract(path, b)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", path, err)
		}
		v = cctx.BuildFile(f)
	case ".cue", ".json":
		v = cctx.CompileBytes(b, cue.Filename(path))
	default:
		return nil, fmt.Errorf("values file %s: unknown format %q: use .cue, .json, .yaml or .yml", path, filepath.Ext(path))
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("values file %s: %w", path, err)
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, fmt.Errorf("values file %s must hold concrete values: %w", path, err)
	}
	return FromCUE(v, source)
}
