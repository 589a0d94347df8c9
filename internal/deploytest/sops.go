package deploytest

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/opmodel/pipeline/engine/encrypted/encryptedtest"
)

// The SOPS fixture, written by `go run ./hack/gensops
// internal/deploytest/testdata/sops`: production values encrypted to a
// test age key committed beside them.
var (
	//go:embed testdata/sops/secrets/production.sops.yaml
	sopsProduction string
	//go:embed testdata/sops/age-key.txt
	sopsKeyFile string
)

// SopsPIN and SopsToken are the plaintext of the fixture's encrypted
// values: the app's Secret value and a ConfigMap entry.
const (
	SopsPIN   = "4711"
	SopsToken = "tok-7d1e0c9a51"
)

// SopsAgeKey returns the fixture's age secret key (AGE-SECRET-KEY-1…).
func SopsAgeKey() string {
	for _, l := range strings.Split(sopsKeyFile, "\n") {
		if strings.HasPrefix(l, "AGE-SECRET-KEY-") {
			return l
		}
	}
	panic("deploytest: testdata/sops/age-key.txt holds no age key")
}

// SopsEncrypted returns the fixture's encrypted production values file.
func SopsEncrypted() []byte { return []byte(sopsProduction) }

// SopsDir writes a deployment directory whose environment "production"
// (namespace ns) declares the encrypted values file in valuesFiles, so
// `--env production` decrypts it with no -f; extraEnv is added to the
// environment's body (CUE).
func SopsDir(t testing.TB, namespace, extraEnv string) string {
	t.Helper()
	return Write(t, map[string]string{
		"secrets/production.sops.yaml": sopsProduction,
		"deploy.cue": fmt.Sprintf(`package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	appmodule "test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

environments: production: {
	namespace: %q
	valuesFiles: ["secrets/production.sops.yaml"]
	%s
}

releases: app: #module: appmodule
`, namespace, extraEnv),
	})
}

// SopsValues writes plaintext values (YAML), encrypted to the fixture's
// age key, to a temporary file and returns its path: a -f file as sops
// would have encrypted it.
func SopsValues(t testing.TB, plaintext string) string {
	t.Helper()
	var recipient string
	for _, l := range strings.Split(sopsKeyFile, "\n") {
		if r, ok := strings.CutPrefix(l, "# public key: "); ok {
			recipient = r
		}
	}
	enc, err := encryptedtest.Encrypt([]byte(plaintext), false, recipient)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.sops.yaml")
	if err := os.WriteFile(p, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Shows reports whether text shows value as a value: anywhere for a long
// one, and for a short one only where it is not part of a longer run of
// hex digits, so "4711" is found in `password: 4711` or `"4711"` but not
// inside a commit hash, an HMAC marker or a UUID (a release ID: four hex
// digits between dashes) that happens to contain it.
func Shows(text, value string) bool {
	if len(value) >= 8 {
		return strings.Contains(text, value)
	}
	text = uuidRE.ReplaceAllString(text, "<uuid>")
	re := regexp.MustCompile(`(^|[^0-9a-fA-F])` + regexp.QuoteMeta(value) + `($|[^0-9a-fA-F])`)
	return re.MatchString(text)
}

var uuidRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
