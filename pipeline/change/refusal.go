package change

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/engine/typecheck"
)

// WouldRefuse lists what the API server would refuse in rel before even
// validating it — values the API's Go types cannot hold, such as a
// quantity "512mb" — each with the values that set it and where: what
// apply reports after the refusal, said at review time instead. A value
// in an object a secret reaches is not quoted.
func WouldRefuse(rel *render.Release) []string {
	var out []string
	for i, r := range rel.Resources {
		secret := i < len(rel.SecretFields) && len(rel.SecretFields[i]) > 0
		for _, inv := range typecheck.Check(r.Object) {
			value := strconv.Quote(inv.Value)
			if secret {
				value = redact.Mark
			}
			line := fmt.Sprintf("apply would refuse %s: field %s = %s is not %s", r.ID(), inv.Path, value, inv.Why)
			if srcs := rel.ValueSources(inv.Value); len(srcs) > 0 && !secret {
				line += ": set by " + strings.Join(srcs, "; and by ")
			}
			out = append(out, line)
		}
	}
	return out
}
