package main

import (
	"context"
	"fmt"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// rollback runs rollback mode: pipeline.Rollback of the one selected
// release in the one selected environment to the rollback-to change, with
// the apply inputs; the summary and outputs are apply's.
func (r *runner) rollback(ctx context.Context) error {
	if r.cfg.rollbackTo == "" {
		return fmt.Errorf("mode rollback needs the rollback-to input: the change ID to return to (opm history lists them)")
	}
	if len(r.cfg.releases) != 1 {
		return fmt.Errorf("mode rollback needs exactly one release in the releases input, not %d", len(r.cfg.releases))
	}
	envs, err := r.environments(ctx)
	if err != nil {
		return err
	}
	if len(envs) != 1 {
		return fmt.Errorf("mode rollback needs exactly one environment in the environments input; the deployment declares %v", envs)
	}
	aopts, closeGroup := r.applyOptions(envs[0])
	res, err := pipeline.Rollback(ctx, pipeline.RollbackOptions{ApplyOptions: aopts, To: r.cfg.rollbackTo, AllowDifferentDigest: r.cfg.allowDifferentDigest})
	closeGroup()
	var results []pipeline.AppliedRelease
	md := ""
	if res != nil {
		r.logApplied(&res.ApplyResult)
		results = res.Releases
		md = fmt.Sprintf("Rolled back from `%s` to `%s` (commit `%s`).\n\n", res.From, res.To, short(res.Commit))
		if res.RenderedDigest != res.RecordedDigest {
			md += fmt.Sprintf("⚠️ The commit rendered digest `%s`, not the recorded `%s` (allow-different-digest).\n\n", report.ShortDigest(res.RenderedDigest), report.ShortDigest(res.RecordedDigest))
		}
	}
	if err != nil {
		err = fmt.Errorf("rolling %s back to %s: %w", r.cfg.releases[0], r.cfg.rollbackTo, err)
	}
	r.addSummary(applyMarkdown("opm rollback", results, envs, err) + md + "\n" + r.info.Footer() + "\n")
	r.applyOutputs(results)
	return err
}
