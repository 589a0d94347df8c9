package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// sopsRepo is a repository whose deployment directory keeps production's
// values in git encrypted; the feature branch rotates them.
func sopsRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: deploytest.SopsDir(t, "prod", "")}
	r.git("init", "-q", "-b", "main")
	r.base = r.commit("base: encrypted production values")
	r.git("checkout", "-q", "-b", "feature")
	rotated, err := os.ReadFile(deploytest.SopsValues(t, "secret: \"0042\"\nconfig: {api-token: tok-new-2b7c91}\n"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(filepath.Join(r.dir, "secrets/production.sops.yaml"), rotated, 0o644))
	r.commit("rotate production's PIN and token")
	return r
}

// The review of a pull request that rotates encrypted values: the key
// comes from the sops-age-key input, a values-secret adds more; neither
// the comment, the summary, the log nor the outputs show a decrypted
// value, its base64, or the key, and the outputs' identifiers are sealed.
func TestReviewWithSecretInputsPublishesNoSecret(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", "")
	assert.NilError(t, os.Unsetenv("SOPS_AGE_KEY"))
	r := sopsRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_PATH"] = "."
	h.env["INPUT_ENVIRONMENTS"] = "production"
	h.env["INPUT_SOPS_AGE_KEY"] = deploytest.SopsAgeKey()
	h.env["INPUT_VALUES_SECRET"] = "config:\n  db-url: postgres://app:pw-from-ci-91@db\n"
	assert.NilError(t, h.run())

	ours := h.ours(prNumber)
	assert.Equal(t, len(ours), 1)
	out := h.outputs()
	published := ours[0].Body + h.summary() + logShown(h) + strings.Join([]string{out["digests"], out["change-ids"]}, "\n")
	contains(t, ours[0].Body, "ConfigMap") // the review is there, values masked
	for _, v := range []string{deploytest.SopsPIN, deploytest.SopsToken, "0042", "tok-new-2b7c91", "pw-from-ci-91", deploytest.SopsAgeKey()} {
		assert.Assert(t, !deploytest.Shows(published, v), "published output shows %q", v)
		assert.Assert(t, !strings.Contains(published, strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(v)), "=")), "published output shows the base64 of %q", v)
	}
	// The runner masks the key and the secret's values in its log.
	contains(t, h.stdout.String(), "::add-mask::"+deploytest.SopsAgeKey())
	contains(t, h.stdout.String(), "::add-mask::postgres://app:pw-from-ci-91@db")
	for _, id := range jsonMap(t, out["change-ids"]) {
		assert.Assert(t, strings.HasPrefix(id, manifest.SealedChangePrefix), id)
	}
	for _, d := range jsonMap(t, out["digests"]) {
		assert.Assert(t, strings.HasPrefix(d, manifest.SealedDigestPrefix), d)
	}

	// With a seal key, the sealed identifiers are the same on every run.
	h.env["INPUT_SEAL_KEY"] = "seal-key-of-the-repo"
	assert.NilError(t, h.run())
	first := h.outputs()["change-ids"]
	assert.NilError(t, h.run())
	assert.Equal(t, h.outputs()["change-ids"], first)
	assert.Assert(t, first != out["change-ids"])
}

// A wrong key fails the step with the configuration error, naming the
// file and what it accepts, and the key itself is nowhere.
func TestReviewWithWrongAgeKeyFailsClearly(t *testing.T) {
	r := sopsRepo(t)
	h := newHarness(t, r, "pull_request", "pull_request.json")
	h.env["INPUT_PATH"] = "."
	h.env["INPUT_ENVIRONMENTS"] = "production"
	h.env["INPUT_SOPS_AGE_KEY"] = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
	err := h.run()
	assert.Assert(t, err != nil)
	all := err.Error() + h.summary() + logShown(h)
	contains(t, all, "secrets/production.sops.yaml")
	assert.Assert(t, !strings.Contains(all, "QQQQQQQQQQQQQQQQQQQQ"), all)
}

// logShown is the log as the runner shows it: ::add-mask:: commands are
// consumed, not printed.
func logShown(h *harness) string {
	var out []string
	for _, l := range strings.Split(h.stdout.String(), "\n") {
		if !strings.HasPrefix(l, "::add-mask::") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
