package values

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/encoding/yaml"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/fault"
)

// Input is one values file: read from Name, or given in memory as Data (a
// secret input of the Action or of Dagger, which never touches the disk).
type Input struct {
	// Name is the file's path, or what a message calls an in-memory input.
	Name string
	// Data, when set, is the content; Name is then only a label.
	Data []byte
	// Secret marks every value as secret even when the content is
	// plaintext (a secret input); SOPS-encrypted content always is.
	Secret bool
}

// Read reads one values input: a values file (CUE, JSON or YAML holding
// one struct, or a SOPS-encrypted JSON or YAML file) whose source is its
// name, or in-memory Data. SOPS-encrypted content, recognised by its
// metadata whatever the name, is decrypted in memory with keys; its values
// are marked secret, and its errors name keys and positions, never values.
func Read(cctx *cue.Context, in Input, keys encrypted.Keys) (*Set, error) {
	b := in.Data
	if b == nil {
		var err error
		if b, err = os.ReadFile(in.Name); err != nil {
			return nil, fmt.Errorf("reading values file: %w", err)
		}
	}
	source := fmt.Sprintf("file %q", in.Name)
	ext := strings.ToLower(filepath.Ext(in.Name))
	secret := in.Secret
	if f := encrypted.OtherSopsFormat(b); f != "" {
		return nil, fault.Validationf("values file %s is a sops %s file: opm reads values from sops YAML and JSON files only; convert it once (`sops -d --output-type yaml %s > values.yaml`, then `sops -e -i values.yaml`)", in.Name, f, in.Name)
	}
	if !encrypted.Is(b) && in.Data == nil {
		if why := encrypted.MeantEncrypted(in.Name); why != "" {
			return nil, fault.Validationf("values file %s is not encrypted, but %s: encrypt it with `sops -e -i %s` before it is committed (or, if it is meant to be plaintext, rename it or narrow the rule)", in.Name, why, in.Name)
		}
	}
	if encrypted.Is(b) {
		plain, format, err := encrypted.Decrypt(in.Name, b, keys)
		if err != nil {
			return nil, err
		}
		b, ext, secret = plain, "."+string(format), true
		source = fmt.Sprintf("file %q (sops)", in.Name)
	} else if (in.Data != nil && ext != ".cue") || ext == "" {
		// An in-memory input has no trustworthy name, and a path without
		// an extension (a pipe: -f <(sops -d …), /dev/fd/63) none: JSON
		// or YAML by content.
		ext = ".yaml"
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
			ext = ".json"
		}
	}
	var v cue.Value
	switch ext {
	case ".yaml", ".yml":
		f, err := yaml.Extract(in.Name, b)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", in.Name, redactIf(secret, err))
		}
		v = cctx.BuildFile(f)
	case ".cue", ".json":
		v = cctx.CompileBytes(b, cue.Filename(in.Name))
	default:
		return nil, fmt.Errorf("values file %s: unknown format %q: use .cue, .json, .yaml or .yml", in.Name, filepath.Ext(in.Name))
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("values file %s: %w", in.Name, redactIf(secret, err))
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, fmt.Errorf("values file %s must hold concrete values: %w", in.Name, redactIf(secret, err))
	}
	s, err := FromCUE(v, source)
	if err != nil {
		return nil, redactIf(secret, err)
	}
	if secret {
		for p, o := range s.Origins {
			o.Secret = true
			s.Origins[p] = o
		}
	}
	return s, nil
}

// redactIf keeps only the positions of a syntax error in secret content:
// a parser quotes the text it choked on.
func redactIf(secret bool, err error) error {
	if !secret {
		return err
	}
	var at []string
	for _, p := range cueerrors.Positions(err) {
		at = append(at, p.String())
	}
	where := ""
	if len(at) > 0 {
		where = " at " + strings.Join(at, ", ")
	}
	return fmt.Errorf("its decrypted content is not valid%s (details withheld: they would quote secret values)", where)
}
