package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
)

// plan runs plan mode: the selected environments (default all) as CI
// matrices, for a workflow that applies each environment in its own job,
// wave after wave. It reads only the deployment directory.
func (r *runner) plan(ctx context.Context) error {
	sel := r.selection(strings.Join(r.cfg.environments, ","))
	p, err := pipeline.PlanFleet(ctx, sel)
	if err != nil {
		return err
	}
	r.setOutput("matrix", mustJSON(p.Matrix))
	r.setOutput("waves", mustJSON(p.Waves))
	r.setOutput("wave-matrices", mustJSON(p.WaveMatrices))
	var b strings.Builder
	b.WriteString("### opm plan\n\n| Wave | Environment | Group |\n| ---: | --- | --- |\n")
	for _, e := range p.Matrix.Include {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", e.Wave, cell(e.Environment), cell(e.Group))
	}
	r.addSummary(b.String() + "\n" + r.info.Footer() + "\n")
	r.infof("plan: %d environments in %d waves", len(p.Matrix.Include), len(p.Waves))
	return nil
}
