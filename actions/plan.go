package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
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
	if md, err := r.planReview(ctx); err != nil {
		return err
	} else {
		b.WriteString(md)
	}
	r.addSummary(b.String() + "\n" + r.info.Footer() + "\n")
	r.infof("plan: %d environments in %d waves", len(p.Matrix.Include), len(p.Waves))
	return nil
}

// planReview sizes a sharded review on a pull request (or with base-ref):
// the pairs to render, what the render cache already holds, and the
// shards that keep each under review-target. Outside a pull request
// there is nothing to review and nothing is set.
func (r *runner) planReview(ctx context.Context) (string, error) {
	if r.ev.pr == nil && r.cfg.baseRef == "" {
		return "", nil
	}
	refs, err := r.baseRefs()
	if err != nil || len(refs) == 0 {
		return "", err
	}
	plan, err := pipeline.PlanReview(ctx, r.reviewOptions(refs))
	if err != nil {
		return "", fmt.Errorf("planning the review: %w", err)
	}
	n := plan.Shards(r.cfg.reviewTarget, r.cfg.reviewMaxShards)
	m := reviewMatrix{Include: []reviewShard{}}
	for i := 1; i <= n; i++ {
		m.Include = append(m.Include, reviewShard{Shard: fmt.Sprintf("%d/%d", i, n)})
	}
	// The split assigns each pair to a shard by cost; it goes to the shard
	// jobs as a file (an artifact): as an output or input it could exceed
	// what a job output or an environment variable holds.
	plan.SplitInto(n)
	file := r.tempPath("opm-review-plan.json")
	if err := os.WriteFile(file, []byte(mustJSON(plan)), 0o644); err != nil {
		return "", fmt.Errorf("writing the review plan: %w", err)
	}
	summary := *plan
	summary.Split = nil
	r.setOutput("review-shards", strconv.Itoa(n))
	r.setOutput("review-matrix", mustJSON(m))
	r.setOutput("review-plan", mustJSON(summary))
	r.setOutput("review-plan-file", file)
	r.infof("review plan: %d pairs to review (%d unchanged), %d renders (%d cached), about %.0fs of rendering: %d shard(s) of at most %s",
		plan.Pairs, plan.Unchanged, plan.Renders, plan.Cached, plan.Seconds, n, r.cfg.reviewTarget)
	return report.ReviewPlanMarkdown(plan), nil
}

// reviewMatrix is the shard jobs' strategy.matrix.
type reviewMatrix struct {
	Include []reviewShard `json:"include"`
}

type reviewShard struct {
	Shard string `json:"shard"`
}
