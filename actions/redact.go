package main

import (
	"cmp"
	"encoding/base64"
	"errors"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// redactor removes kubeconfig material from text the Action writes. The
// runner masks the same strings in the log (AddMask), but the comment,
// summary and outputs are not logs: an error naming the API server's URL
// must not reach a public pull request.
type redactor struct {
	// secrets, longest first so a fragment never hides a longer one.
	secrets []string
}

// minSecret skips values too short to be secret and common enough to
// wreck unrelated text ("v1", "true").
const minSecret = 8

func newRedactor(kubeconfig []byte) *redactor {
	r := &redactor{}
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

// text returns s with every secret replaced by ***.
func (r *redactor) text(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "***")
	}
	return s
}

// error returns err with its message redacted (nil stays nil).
func (r *redactor) error(err error) error {
	if err == nil || len(r.secrets) == 0 {
		return err
	}
	if msg := r.text(err.Error()); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}

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
