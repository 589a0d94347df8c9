package report

import (
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
)

// DriftMarkdown is the table of environments a drift report starts with.
func DriftMarkdown(envs []pipeline.EnvironmentDrift) string {
	var b strings.Builder
	b.WriteString("| Environment | Status | Releases | + | ~ | − | 👻 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, e := range envs {
		icon := map[string]string{pipeline.InSync: "✅", pipeline.Drifted: "⚠️", pipeline.DriftError: "❌", pipeline.Unreachable: "🔌"}[e.Status]
		if e.Status == pipeline.Unreachable || e.Status == pipeline.DriftError {
			fmt.Fprintf(&b, "| %s | %s %s | %d | | | | |\n", mdCell(mdEnvLabel(e.Environment)), icon, e.Status, e.Releases)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s %s | %d | %d | %d | %d | %d |\n", mdCell(mdEnvLabel(e.Environment)), icon, e.Status, e.Releases, e.Added, e.Modified, e.Stale, e.Ghost)
	}
	return b.String()
}
