package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/actions/driftissue"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// drift runs drift mode, for scheduled workflows: diff every selected
// environment against its cluster, write the job summary, keep the
// repository's drift issue up to date, set the outputs. An environment
// that cannot be reached is reported as unreachable (never as in sync)
// and fails the step unless continue-on-unreachable.
func (r *runner) drift(ctx context.Context) error {
	opts := pipeline.DiffOptions{
		Selection:       r.selection(""),
		ClusterOptions:  pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
		Protection:      r.cfg.protection(),
		AllEnvironments: len(r.cfg.environments) == 0,
		Environments:    r.cfg.environments,
	}
	cs, err := pipeline.Diff(ctx, opts)
	if cs == nil {
		return err
	}
	// err repeats the releases' own Error fields; they are reported there.
	envs := cs.Drift()
	var bad, unreachable []string
	inSync := true
	for _, e := range envs {
		r.infof("%s: %s (+%d ~%d -%d, %d ghosts)", envLabel(e.Environment), e.Status, e.Added, e.Modified, e.Stale, e.Ghost)
		switch e.Status {
		case pipeline.Unreachable:
			unreachable = append(unreachable, envLabel(e.Environment))
		case pipeline.DriftError:
			bad = append(bad, envLabel(e.Environment))
		}
		inSync = inSync && e.Status == pipeline.InSync
	}
	mdOpts := report.MarkdownOptions{Title: "opm drift", BaseLabel: "live", HeadLabel: "repository", Intro: report.DriftMarkdown(envs)}
	sumOpts := report.ReportMarkdownOptions(r.info.Footer())
	sumOpts.Title, sumOpts.BaseLabel, sumOpts.HeadLabel, sumOpts.Intro = mdOpts.Title, mdOpts.BaseLabel, mdOpts.HeadLabel, mdOpts.Intro
	r.addSummary(report.Markdown(cs, sumOpts))

	issueURL, err := r.driftIssue(ctx, cs, mdOpts, envs, inSync)
	if err != nil {
		return err
	}
	count := cs.Counts.Drifted()
	r.setOutputs(cs, "")
	r.setOutput("drifted", strconv.FormatBool(count > 0))
	r.setOutput("drift-count", strconv.Itoa(count))
	r.setOutput("issue-url", issueURL)

	switch {
	case len(bad) > 0:
		return fmt.Errorf("releases in %s could not be compared: see the job summary", strings.Join(bad, ", "))
	case len(unreachable) > 0 && !r.cfg.continueOnUnreachable:
		return fmt.Errorf("environments %s are unreachable, so their drift is unknown; set continue-on-unreachable: true to report them without failing", strings.Join(unreachable, ", "))
	}
	return nil
}

// driftIssue opens, updates or closes the repository's drift issue and
// returns its URL ("" when there is none, or no token may write it).
func (r *runner) driftIssue(ctx context.Context, cs *pipeline.ChangeSet, mdOpts report.MarkdownOptions, envs []pipeline.EnvironmentDrift, inSync bool) (string, error) {
	if !r.cfg.issue {
		return "", nil
	}
	if r.cfg.token == "" {
		r.action.Noticef("No github-token: the drift report is in the job summary, not in an issue.")
		return "", nil
	}
	client, err := comment.NewClient(r.http, r.gh.APIURL, r.cfg.token)
	if err != nil {
		return "", err
	}
	owner, repo := r.gh.Repo()
	marker := driftissue.Marker(r.cfg.path)
	mdOpts.Marker, mdOpts.SummaryURL, mdOpts.Footer = marker, r.runURL(), r.info.Footer()
	var names []string
	for _, e := range envs {
		if e.Status != pipeline.InSync {
			names = append(names, fmt.Sprintf("%s %s", envLabel(e.Environment), e.Status))
		}
	}
	rep := driftissue.Report{
		Drifted: !inSync,
		Title:   fmt.Sprintf("opm drift in %s: %s", r.cfg.path, strings.Join(names, ", ")),
		Body:    r.red.text(report.Markdown(cs, mdOpts)),
		ClosingComment: r.red.text(fmt.Sprintf("✅ Every environment matches the repository again (%d objects compared). %s\n\n%s",
			cs.Counts.Unchanged, r.runURL(), r.info.Footer())),
	}
	res, err := driftissue.Sync(ctx, client, driftissue.Target{Owner: owner, Repo: repo}, marker, rep)
	if comment.IsForbidden(err) {
		r.action.Warningf("The token may not write issues (give the job `permissions: issues: write`): the drift report is in the job summary. %s", r.red.text(err.Error()))
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if res.Action != driftissue.None {
		r.infof("Drift issue %s: %s", res.Action, res.URL)
	}
	if res.Action == driftissue.Closed {
		return "", nil
	}
	return res.URL, nil
}
