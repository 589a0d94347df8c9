package main

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/opmodel/pipeline/engine/redact"
)

// redactor is the Action's side of the one redaction point
// (engine/redact): everything the Action writes (log, outputs, summary,
// comments, issues) passes through it. The pipeline registers what it
// renders and reads (secret values and what derives from them, the
// identifiers of releases holding secrets, names that carry a secret);
// the Action adds kubeconfig material and its own secret inputs. The
// runner masks the same inputs in the log (AddMask), but the comment,
// summary and outputs are not logs: an error naming the API server's URL
// must not reach a public pull request.
type redactor struct {
	r *redact.Redactor
	// secrets are the Action's own, longest first, for AddMask.
	secrets []string
}

// minSecret skips values too short to be secret and common enough to
// wreck unrelated text ("v1", "true").
const minSecret = 8

func newRedactor(red *redact.Redactor, kubeconfig []byte) *redactor {
	r := &redactor{r: red}
	if len(kubeconfig) == 0 {
		return r
	}
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= minSecret && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// Not a kubeconfig we can read: treat every long value as secret.
		for _, line := range strings.Split(string(kubeconfig), "\n") {
			if _, v, ok := strings.Cut(line, ":"); ok {
				add(strings.Trim(strings.TrimSpace(v), `"'`))
			}
		}
	} else {
		for _, c := range cfg.Clusters {
			add(c.Server)
			add(c.ProxyURL)
			if len(c.CertificateAuthorityData) > 0 {
				add(base64.StdEncoding.EncodeToString(c.CertificateAuthorityData))
			}
		}
		for _, u := range cfg.AuthInfos {
			add(u.Token)
			add(u.Password)
			add(u.Username)
			for _, d := range [][]byte{u.ClientCertificateData, u.ClientKeyData} {
				if len(d) > 0 {
					add(base64.StdEncoding.EncodeToString(d))
				}
			}
			if u.AuthProvider != nil {
				for _, v := range u.AuthProvider.Config {
					add(v)
				}
			}
			if u.Exec != nil {
				for _, e := range u.Exec.Env {
					add(e.Value)
				}
			}
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return r
}

// text returns s redacted: the Action's secrets become ***, and what the
// pipeline registered is masked or sealed.
func (r *redactor) text(s string) string { return r.r.String(s) }

// error returns err with its message redacted (nil stays nil).
func (r *redactor) error(err error) error { return r.r.Error(err) }

// addSecretInputs masks the secret inputs: the age key and seal key whole,
// and every line and scalar of the values secret (the runner masks line by
// line, and a value may be printed on its own). An encrypted values secret
// holds only ciphertext here; its decrypted values are masked by the
// pipeline wherever values are shown.
func (r *redactor) addSecretInputs(values []byte, keys ...string) {
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= minSecret && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	for _, k := range keys {
		add(k)
	}
	for _, line := range strings.Split(string(values), "\n") {
		add(line)
		if _, v, ok := strings.Cut(line, ":"); ok {
			add(strings.Trim(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), ",")), `"'`))
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
}

// register hands the Action's secrets to the run's redactor: after the
// runner was told to mask them (AddMask), since the commands that tell
// it pass through the redactor too.
func (r *redactor) register() { r.r.Literal("***", r.secrets...) }
