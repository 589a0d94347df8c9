package render

import (
	"fmt"
	"path/filepath"
	"slices"

	"cuelang.org/go/cue"

	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/values"
)

// envValuesFiles reads an environment's valuesFiles: a list merged into
// every release of the environment, or a map from release key to its own
// list. Paths are relative to the deployment directory, so the same
// `opm apply --env production` works from any working directory; files
// encrypted with SOPS are decrypted in memory.
func (p *plan) envValuesFiles() (map[string][]*values.Set, error) {
	vf := p.env.LookupPath(cue.ParsePath("valuesFiles"))
	if !vf.Exists() {
		return nil, nil
	}
	out := map[string][]*values.Set{}
	read := func(key string, list cue.Value) error {
		it, err := list.List()
		if err != nil {
			return fault.Validationf("environment %q: valuesFiles must be a list of paths or a map from release to a list of paths (at %s)", p.opts.Environment, list.Pos())
		}
		for it.Next() {
			rel, err := it.Value().String()
			if err != nil {
				return fault.Validationf("environment %q: valuesFiles entries are paths relative to the deployment directory (at %s)", p.opts.Environment, it.Value().Pos())
			}
			path := rel
			if !filepath.IsAbs(path) {
				path = filepath.Join(p.d.Dir, rel)
			}
			p.opts.reads.Add(path)
			// A base read from git holds its CUE files in the overlay.
			s, err := values.Read(p.d.Context, values.Input{Name: path, Data: p.d.Overlay[path]}, p.opts.Keys)
			if err != nil {
				return fault.Wrap(readKind(err), fmt.Errorf("environment %q, valuesFiles entry %q (at %s): %w", p.opts.Environment, rel, it.Value().Pos(), err))
			}
			out[key] = append(out[key], s)
		}
		return nil
	}
	if vf.IncompleteKind() == cue.ListKind {
		return out, read("", vf)
	}
	it, err := vf.Fields()
	if err != nil {
		return nil, fault.Validationf("environment %q: valuesFiles must be a list of paths or a map from release to a list of paths (at %s)", p.opts.Environment, vf.Pos())
	}
	for it.Next() {
		key := it.Selector().Unquoted()
		if !slices.Contains(p.keys, key) {
			// Another release's files: not read, so a render of this one
			// needs no key to another's secrets.
			continue
		}
		if err := read(key, it.Value()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// filesFor is what release key merges after its environment's values:
// the environment's files for every release, then its own, then -f.
func (p *plan) filesFor(key string) []*values.Set {
	out := append([]*values.Set{}, p.envFiles[""]...)
	out = append(out, p.envFiles[key]...)
	return append(out, p.files...)
}

// readKind classes a values file's failure: a missing key is the
// operator's configuration, anything else (a missing file, bad syntax,
// a tampered file) bad input.
func readKind(err error) fault.Kind {
	if fault.KindOf(err) == fault.Configuration {
		return fault.Configuration
	}
	return fault.Validation
}
