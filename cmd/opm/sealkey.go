package main

import "github.com/opmodel/pipeline/engine/userkey"

// sealKey is the key that seals the identifiers of releases holding secret
// data (and names that carry a secret) in everything opm prints:
// OPM_SEAL_KEY when set (a CI secret, so runs agree), otherwise this
// user's own key, created once under the user config directory, so that a
// sealed change ID `opm history` shows can be passed to `opm rollback
// --to` in a later run. "" (a random key of the run) when neither exists.
func sealKey(getenv func(string) string) string {
	if k := getenv(sealKeyEnv); k != "" {
		return k
	}
	p := userkey.Path()
	if p == "" {
		return ""
	}
	k, err := userkey.Read(p)
	if err != nil {
		return ""
	}
	return k
}
