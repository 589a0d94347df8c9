// Command gensops writes the SOPS fixture of internal/deploytest: a fresh
// age key (a test key, committed on purpose and used nowhere else) and the
// production values file encrypted to it, as `sops --encrypt --age` would.
//
//	go run ./hack/gensops internal/deploytest/testdata/sops
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
)

// plaintext is the fixture's production values: a 4-digit PIN for the
// app's Secret (the guessing-oracle test tries all 10 000) and a token that
// flows into a ConfigMap, where only redaction keeps it out of diffs.
const plaintext = `secret: "4711"
config:
  api-token: tok-7d1e0c9a51
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gensops DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gensops:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	key, err := encryptedtest.NewAgeKey()
	if err != nil {
		return err
	}
	enc, err := encryptedtest.Encrypt([]byte(plaintext), false, key.Recipient)
	if err != nil {
		return err
	}
	keyFile := fmt.Sprintf("# A test key: it opens only this fixture.\n# public key: %s\n%s\n", key.Recipient, key.Identity)
	if err := os.WriteFile(filepath.Join(dir, "age-key.txt"), []byte(keyFile), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "secrets", "production.sops.yaml"), enc, 0o644)
}
