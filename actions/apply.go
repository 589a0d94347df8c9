package main

import (
	"context"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// apply runs apply mode: pipeline.Apply per environment, the log grouped
// per release, a summary of what was applied and pruned, the outputs. The
// first failure stops the run (later environments are not touched) and
// fails the step, after the summary and outputs are written.
func (r *runner) apply(ctx context.Context) error {
	envs, err := r.environments(ctx)
	if err != nil {
		return err
	}
	var (
		results []pipeline.AppliedRelease
		runErr  error
	)
	for _, env := range envs {
		res, err := r.applyEnv(ctx, env)
		if res != nil {
			results = append(results, res.Releases...)
		}
		if err != nil {
			runErr = fmt.Errorf("applying environment %s: %w", envLabel(env), err)
			break
		}
	}
	r.addSummary(applyMarkdown("opm apply", results, envs, runErr) + "\n" + r.fleetBoard(ctx, envs) + r.info.Footer() + "\n")
	r.applyOutputs(results)
	return runErr
}

// applyOutputs sets apply's outputs from what was applied.
func (r *runner) applyOutputs(results []pipeline.AppliedRelease) {
	digests, changeIDs := map[string]string{}, map[string]string{}
	stale, changed := 0, false
	for _, ar := range results {
		k := releaseKey(ar.Name, ar.Environment)
		if ar.Error == "" {
			digests[k], changeIDs[k] = ar.ManifestDigest, ar.ChangeID
		}
		c := ar.Counts
		stale += len(ar.Stale)
		changed = changed || c.Created+c.Configured+c.Recreated+c.Deleted > 0
	}
	r.setOutput("digests", mustJSON(digests))
	r.setOutput("change-ids", mustJSON(changeIDs))
	r.setOutput("stale-count", strconv.Itoa(stale))
	r.setOutput("has-changes", strconv.FormatBool(changed))
	r.setOutput("comment-url", "")
}

// applyEnv applies one environment, one log group per release.
func (r *runner) applyEnv(ctx context.Context, env string) (*pipeline.ApplyResult, error) {
	opts, closeGroup := r.applyOptions(env)
	// Apply checks the environment's promotion gates first: a matrix job
	// applies one environment and still cannot skip those it must follow.
	res, err := pipeline.Apply(ctx, opts)
	closeGroup()
	if res != nil {
		// Logs, summary and outputs are published: seal what holds secrets.
		res = res.Sealed(r.sealer)
	}
	r.logApplied(res)
	return res, err
}

// applyOptions are apply's options for env from the inputs, with progress
// in one log group per release; call closeGroup when done.
func (r *runner) applyOptions(env string) (opts pipeline.ApplyOptions, closeGroup func()) {
	current, open := "", false
	closeGroup = func() {
		if open {
			r.action.EndGroup()
			open = false
		}
	}
	opts = pipeline.ApplyOptions{
		Selection:      r.selection(env),
		ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
		NoPrune:        r.cfg.noPrune, Force: r.cfg.force, ForceConflicts: r.cfg.forceConflicts, TakeOver: r.cfg.takeOver, MaxHistory: r.cfg.maxHistory, RunURL: r.runURL(), PruneGhosts: r.cfg.pruneGhosts,
		Protection:  r.cfg.protection(),
		GateTimeout: r.cfg.gateTimeout,
		Wait:        r.cfg.wait, WaitTimeout: r.cfg.timeout,
		HealthWaiting: func(waiting string) { r.infof("%s", waiting) },
		GateWaiting: func(refusal error) {
			r.infof("%s", refusal)
		},
		// The run's page names the holder to other runs that wait for it.
		Locking: pipeline.Locking{Holder: r.lockHolder(), LockTimeout: r.cfg.lockTimeout, NoLockWait: r.cfg.lockTimeout == 0,
			LockWaiting: func(h pipeline.LockHolder) {
				r.action.Noticef("%s", r.red.text(fmt.Sprintf("waiting for the release lock (Lease %s/%s) held by %s", h.Namespace, h.Name, h)))
			}},
		// Progress is never called concurrently.
		Progress: func(e pipeline.ProgressEvent) {
			if !open || e.Release != current {
				closeGroup()
				r.action.Group(r.red.text(fmt.Sprintf("%s %s (%s)", r.cfg.mode, e.Release, envLabel(env))))
				current, open = e.Release, true
			}
			r.infof("%s", e.Line())
		},
	}
	return opts, closeGroup
}

// logApplied prints each release's summary line and warnings.
func (r *runner) logApplied(res *pipeline.ApplyResult) {
	if res == nil {
		return
	}
	for _, ar := range res.Releases {
		r.infof("%s", report.AppliedLine(ar))
		for _, w := range ar.Warnings {
			r.action.Warningf("%s: %s", releaseKey(ar.Name, ar.Environment), r.red.text(w))
		}
	}
}

// lockHolder names this run in the release lock: its page, plus the job
// so two jobs of one run are told apart.
func (r *runner) lockHolder() string {
	h := r.runURL()
	if h == "" {
		return ""
	}
	if r.gh.Job != "" {
		h += " (job " + r.gh.Job + ")"
	}
	return h
}

// applyMarkdown is the job summary of an apply: a table of releases with
// what happened, then per release the pruned and skipped objects and any
// failure.
func applyMarkdown(title string, results []pipeline.AppliedRelease, envs []string, runErr error) string {
	var b strings.Builder
	named := make([]string, 0, len(envs))
	for _, e := range envs {
		if e != "" {
			named = append(named, e)
		}
	}
	b.WriteString("## " + title)
	if len(named) > 0 {
		b.WriteString(": " + strings.Join(named, ", "))
	}
	b.WriteString("\n\n")
	if runErr != nil {
		fmt.Fprintf(&b, "❌ **The %s failed**; later releases and environments were not touched.\n\n", strings.TrimPrefix(title, "opm "))
	}
	if len(results) > 0 {
		b.WriteString("| Release | Environment | Namespace | Change ID | Digest | Created | Configured | Unchanged | Pruned | Kept |\n")
		b.WriteString("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, ar := range results {
			c := ar.Counts
			status := ""
			if ar.Error != "" {
				status = " ❌"
			}
			fmt.Fprintf(&b, "| %s%s | %s | %s | `%s` | `%s` | %d | %d | %d | %d | %d |\n",
				cell(ar.Name), status, cell(envLabel(ar.Environment)), cell(ar.Namespace), ar.ChangeID, report.ShortDigest(ar.ManifestDigest),
				c.Created+c.Recreated, c.Configured, c.Unchanged, c.Deleted, c.Skipped)
		}
		b.WriteString("\n")
	}
	if runErr != nil {
		b.WriteString(fence(runErr.Error()))
	}
	// Details per release, as many as fit GitHub's 1 MiB per step.
	for _, ar := range results {
		if ar.Error == "" && len(ar.Pruned) == 0 && len(ar.Skipped) == 0 && len(ar.Warnings) == 0 {
			continue
		}
		var d strings.Builder
		fmt.Fprintf(&d, "<details>\n<summary><b>%s</b> · %s</summary>\n\n", html.EscapeString(ar.Name), html.EscapeString(envLabel(ar.Environment)))
		for _, w := range ar.Warnings {
			fmt.Fprintf(&d, "- ⚠️ %s\n", cell(w))
		}
		if len(ar.Warnings) > 0 {
			d.WriteString("\n")
		}
		if len(ar.Pruned)+len(ar.Skipped) > 0 {
			d.WriteString("| Stale object | Component | Action | Reason |\n| --- | --- | --- | --- |\n")
			for _, list := range [][]pipeline.ObjectChange{ar.Pruned, ar.Skipped} {
				for _, o := range list {
					fmt.Fprintf(&d, "| %s | %s | %s | %s |\n", cell(o.ID().String()), cell(o.Component), o.Action, cell(o.Reason))
				}
			}
			d.WriteString("\n")
		}
		if ar.Error != "" {
			d.WriteString(fence(ar.Error))
		}
		d.WriteString("</details>\n\n")
		if b.Len()+d.Len() > summaryLimit-256 {
			b.WriteString("_The remaining details were cut at GitHub's 1 MiB summary limit._\n")
			break
		}
		b.WriteString(d.String())
	}
	return b.String()
}

func fence(s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + "text\n" + strings.TrimRight(s, "\n") + "\n" + f + "\n\n"
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r", ""), "\n", " ")
}

func envLabel(env string) string {
	if env == "" {
		return "-"
	}
	return env
}

// fleetBoard is the fleet board (opm status --group -o markdown) of the
// fleet the applied environments belong to: their groups, their gates
// and themselves, so every wave's job summary answers "which commit runs
// where, healthy since when". Environments this job cannot read (another
// cluster) are named below it; "" when the applied environments are not
// part of a fleet.
func (r *runner) fleetBoard(ctx context.Context, applied []string) string {
	all, err := pipeline.DeclaredEnvironments(ctx, r.dir())
	if err != nil || len(all) < 2 {
		return ""
	}
	fl, err := pipeline.Fleet(ctx, pipeline.Selection{Dir: r.dir(), Environment: strings.Join(all, ",")})
	if err != nil {
		return ""
	}
	want := map[string]bool{}
	groups := map[string]bool{}
	for _, e := range fl {
		if slices.Contains(applied, e.Name) {
			want[e.Name] = true
			for _, g := range e.Gates {
				want[g] = true
			}
			if e.Group != "" {
				groups[e.Group] = true
			}
		}
	}
	var names []string
	for _, e := range fl {
		if want[e.Name] || groups[e.Group] {
			names = append(names, e.Name)
		}
	}
	if len(names) < 2 && len(groups) == 0 {
		return ""
	}
	st, err := pipeline.Status(ctx, pipeline.StatusOptions{
		Target:         pipeline.Target{Selection: pipeline.Selection{Dir: r.dir(), Environment: strings.Join(names, ",")}},
		ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
	})
	var b strings.Builder
	b.WriteString("### Fleet board\n\n")
	if st != nil && len(st.Releases) > 0 {
		b.WriteString(report.FleetBoardMarkdown(st))
	}
	if err != nil {
		b.WriteString("\n_Not every environment could be read from this job:_\n\n```\n" + err.Error() + "\n```\n")
	}
	return r.red.text(b.String()) + "\n"
}
