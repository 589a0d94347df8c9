package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/internal/deploytest"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// Masking is no oracle: public notes that happen to equal the PIN, beside
// others that do not, all show as written in every form a review takes.
// Were the mask decided by text, exactly the note equal to the PIN would
// be masked and the review would say which one it is.
func TestPublicValuesEqualToASecretStayVisible(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	base := deploytest.AttackDir(t, "prod", deploytest.AttackSOPS, deploytest.AttackCanary, deploytest.AttackPIN)
	head := t.TempDir()
	assert.NilError(t, os.CopyFS(head, os.DirFS(base)))
	decoys := map[string]string{}
	var notes []string
	for i, v := range []string{"0814", deploytest.AttackPIN, "0816", "1234", "8150", "0000", "9999", "5180", deploytest.AttackPIN2, "4711"} {
		k := fmt.Sprintf("n%d", i)
		decoys[k] = v
		notes = append(notes, fmt.Sprintf("%s: %q", k, v))
	}
	deploy := filepath.Join(head, "deploy.cue")
	b, err := os.ReadFile(deploy)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(deploy, []byte(string(b)+"\nreleases: attack: values: notes: {"+strings.Join(notes, ", ")+"}\n"), 0o644))

	cs, err := pipeline.Review(context.Background(), pipeline.ReviewOptions{
		Selection: pipeline.Selection{Dir: head, Environment: "production"}, BaseDir: base, NoSkip: true})
	assert.NilError(t, err)
	for form, text := range map[string]string{
		"markdown": report.Markdown(cs, report.MarkdownOptions{}),
		"text":     report.Text(cs, false),
		"json":     jsonString(t, cs),
	} {
		for k, v := range decoys {
			line := fmt.Sprintf("note-%s: %q", k, v)
			if form == "json" {
				line = fmt.Sprintf(`note-%s: \"%s\"`, k, v)
			}
			assert.Assert(t, strings.Contains(text, line), "the %s review hides the public note %s = %q:\n%s", form, k, v, text)
		}
		assert.Assert(t, !strings.Contains(text, "dsn: postgres://app:cnry"), "the DSN a secret reaches is masked")
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	assert.NilError(t, err)
	return string(b)
}
