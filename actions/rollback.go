package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// rollback runs rollback mode: pipeline.Rollback of the one selected
// release in the one selected environment to the rollback-to change, with
// the apply inputs; the summary and outputs are apply's. When the
// environments input names a fleet (a group, or several), every selected
// release (default all) of it goes back to the rollback-to commit, the
// last wave first (pipeline.RollbackFleet), and the fleet board follows.
func (r *runner) rollback(ctx context.Context) error {
	if r.cfg.rollbackTo == "" {
		return fmt.Errorf("mode rollback needs the rollback-to input: the change ID to return to (opm history lists them), or for a group the git commit")
	}
	envs, err := r.environments(ctx)
	if err != nil {
		return err
	}
	if len(envs) > 1 {
		return r.rollbackFleet(ctx, envs)
	}
	if len(r.cfg.releases) != 1 {
		return fmt.Errorf("mode rollback needs exactly one release in the releases input, not %d (or a group in environments, to roll a fleet back to a commit)", len(r.cfg.releases))
	}
	if len(envs) != 1 {
		return fmt.Errorf("mode rollback needs exactly one environment (or a group) in the environments input; the deployment declares %v", envs)
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

// rollbackFleet rolls the fleet envs back to the rollback-to commit and
// writes the result and the fleet board into the job summary.
func (r *runner) rollbackFleet(ctx context.Context, envs []string) error {
	aopts, closeGroup := r.applyOptions(strings.Join(envs, ","))
	res, err := pipeline.RollbackFleet(ctx, pipeline.RollbackOptions{ApplyOptions: aopts, To: r.cfg.rollbackTo, AllowDifferentDigest: r.cfg.allowDifferentDigest}, r.cfg.waveTimeout)
	closeGroup()
	var results []pipeline.AppliedRelease
	md := ""
	if res != nil {
		for _, e := range res.Environments {
			results = append(results, e.Releases...)
		}
		ar := (&pipeline.ApplyResult{Releases: results}).Sealed(r.sealer)
		results = ar.Releases
		r.logApplied(ar)
		md = "```\n" + r.red.text(report.RolloutTable(res)) + "```\n\n"
	}
	if err != nil {
		err = fmt.Errorf("rolling %s back to %s: %w", strings.Join(envs, ", "), r.cfg.rollbackTo, err)
	}
	r.addSummary(applyMarkdown("opm rollback", results, envs, err) + md + r.fleetBoard(ctx, envs) + "\n" + r.info.Footer() + "\n")
	r.applyOutputs(results)
	return err
}
