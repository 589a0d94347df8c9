package report

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/opmodel/pipeline/pipeline"
)

// RBACYAML is every release's rights as one multi-document YAML stream,
// ready for kubectl apply -f -.
func RBACYAML(r *pipeline.RBACResult) ([]byte, error) {
	var b bytes.Buffer
	for _, rel := range r.Releases {
		fmt.Fprintf(&b, "# release %s in environment %s, as %s\n", rel.Name, rel.Environment, rel.Identity)
		for _, o := range rel.Objects {
			y, err := yaml.Marshal(o)
			if err != nil {
				return nil, err
			}
			b.WriteString("---\n")
			b.Write(y)
		}
	}
	return b.Bytes(), nil
}
