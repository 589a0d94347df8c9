package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// smoke runs smoke mode: pipeline.Smoke per environment on the cluster an
// earlier step provides (kind, k3d: the kubeconfig input, else the runner's
// default kubeconfig), one log group per environment, the report in the job
// summary and in a sticky comment of its own; a failed check fails the step
// after both are written.
func (r *runner) smoke(ctx context.Context) error {
	envs, err := r.environments(ctx)
	if err != nil {
		return err
	}
	all := &pipeline.SmokeResult{Passed: true, Releases: []pipeline.SmokeRelease{}}
	var runErr error
	for _, env := range envs {
		res, err := r.smokeEnv(ctx, env)
		if res != nil {
			all.Cluster = res.Cluster
			all.Releases = append(all.Releases, res.Releases...)
			all.Passed = all.Passed && res.Passed
			all.DurationSeconds += res.DurationSeconds
		}
		if err != nil {
			runErr = fmt.Errorf("smoke-testing environment %s: %w", envLabel(env), err)
			break
		}
	}
	var named []string
	for _, e := range envs {
		if e != "" {
			named = append(named, e)
		}
	}
	mdOpts := report.MarkdownOptions{Title: "opm smoke test", Environments: named}
	if len(all.Releases) > 0 || runErr == nil {
		r.addSummary(report.SmokeMarkdown(all, withLimit(mdOpts, summaryLimit, "", "")) + "\n" + r.info.Footer() + "\n")
	}
	marker := comment.SmokeMarker(fmt.Sprintf("%s/%s/%s", r.gh.Workflow, r.gh.Job, r.envKey()))
	url, err := r.stickyComment(ctx, "smoke test", marker, func() string {
		o := withLimit(mdOpts, 0, r.runURL(), "")
		o.Marker = marker
		md := report.SmokeMarkdown(all, o)
		if runErr != nil {
			md += "\n❌ The smoke test could not run to the end: " + strings.ReplaceAll(runErr.Error(), "\n", " ") + "\n"
		}
		return md + "\n" + r.info.Footer() + "\n"
	})
	if err != nil && runErr == nil {
		runErr = err
	}
	r.setOutput("comment-url", url)
	if runErr != nil {
		return runErr
	}
	if !all.Passed {
		return fmt.Errorf("smoke test failed for %s: see the job summary", strings.Join(failedKeys(all), ", "))
	}
	return nil
}

func failedKeys(res *pipeline.SmokeResult) []string {
	var out []string
	for _, rel := range res.Releases {
		if !rel.Passed {
			out = append(out, fmt.Sprintf("%s (%s)", releaseKey(rel.Name, rel.Environment), rel.FailedStep))
		}
	}
	return out
}

// smokeEnv smoke-tests one environment's releases in a log group.
func (r *runner) smokeEnv(ctx context.Context, env string) (*pipeline.SmokeResult, error) {
	r.action.Group(r.red.text(fmt.Sprintf("smoke test (%s)", envLabel(env))))
	defer r.action.EndGroup()
	res, err := pipeline.Smoke(ctx, pipeline.SmokeOptions{
		Selection:      r.selection(env),
		ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
		Timeout:        r.cfg.timeout,
		OnStep:         func(p pipeline.SmokeProgress) { r.infof("%s", report.SmokeProgressLine(p)) },
	})
	if res != nil {
		r.infof("%s", report.SmokeText(res))
	}
	return res, err
}

// stickyComment creates or updates one pull-request comment (found by
// marker) with body(), for what ("review", "smoke test"): no pull request,
// comments off, a fork's read-only token or no token mean the job summary
// only; a token that may not write gets a warning. body is called only when
// a comment will be written. It returns the comment's URL.
func (r *runner) stickyComment(ctx context.Context, what, marker string, body func() string) (string, error) {
	if !r.cfg.comment || r.ev.pr == nil {
		return "", nil
	}
	pr := r.ev.pr
	switch {
	case pr.fork() && r.ev.name == "pull_request":
		r.action.Noticef("This pull request comes from the fork %s, whose token is read-only: the %s is in the job summary, not in a comment.", pr.headRepo, what)
		return "", nil
	case r.cfg.token == "":
		r.action.Noticef("No github-token: the %s is in the job summary, not in a comment.", what)
		return "", nil
	}
	owner, repo := r.gh.Repo()
	client, err := comment.NewClient(r.http, r.gh.APIURL, r.cfg.token)
	if err != nil {
		return "", err
	}
	res, err := comment.Upsert(ctx, client, comment.Target{Owner: owner, Repo: repo, Number: pr.number}, marker, r.red.text(body()))
	if comment.IsForbidden(err) {
		r.action.Warningf("The token may not comment on this pull request (give the job `permissions: pull-requests: write`): the %s is in the job summary. %s", what, r.red.text(err.Error()))
		return "", nil
	}
	if err != nil {
		return "", err
	}
	verb := "Updated"
	if res.Created {
		verb = "Created"
	}
	r.infof("%s the %s comment %s", verb, what, res.URL)
	return res.URL, nil
}
