package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

// review runs review mode: the change set, the job summary, the sticky
// comment and the outputs; then fails on errors and, if asked, on prunes.
func (r *runner) review(ctx context.Context) error {
	var (
		cs     *pipeline.ChangeSet
		err    error
		mdOpts report.MarkdownOptions
	)
	switch {
	case len(r.cfg.kubeconfig) > 0 && (r.cfg.shard != nil || r.cfg.partialsDir != ""):
		return fmt.Errorf("inputs shard and partials-dir split a review from git, but with kubeconfig review mode diffs against the cluster: give the shard and merge jobs no kubeconfig")
	case r.cfg.reviewPlanFile != "" && r.cfg.shard == nil:
		return fmt.Errorf("input review-plan-file tells a shard its part: give shard too")
	case len(r.cfg.kubeconfig) > 0:
		mdOpts = report.MarkdownOptions{Title: "opm diff", BaseLabel: "live", HeadLabel: "render"}
		cs, err = r.clusterDiff(ctx)
	case r.cfg.shard != nil:
		return r.reviewShard(ctx)
	case r.cfg.partialsDir != "":
		mdOpts = report.MarkdownOptions{Title: "opm review"}
		cs, err = r.mergedReview()
	default:
		mdOpts = report.MarkdownOptions{Title: "opm review"}
		cs, err = r.gitReview(ctx)
	}
	if err != nil {
		return err
	}
	// Everything below is published: releases holding secret data show
	// sealed identifiers (pipeline.ChangeSet.Sealed).
	cs = cs.Sealed(r.sealer)
	r.logChangeSet(cs)

	sumOpts := report.ReportMarkdownOptions(r.info.Footer())
	sumOpts.Title, sumOpts.BaseLabel, sumOpts.HeadLabel = mdOpts.Title, mdOpts.BaseLabel, mdOpts.HeadLabel
	r.addSummary(report.Markdown(cs, sumOpts))
	// The whole review, uncut, for a workflow artifact: the summary and
	// the comment are cut to GitHub's limits at organisation scale.
	full := r.tempPath("opm-review.md")
	if err := os.WriteFile(full, []byte(r.red.text(report.Markdown(cs, withLimit(sumOpts, -1, "", "")))), 0o644); err == nil {
		r.setOutput("report", full)
	}

	commentURL, err := r.comment(ctx, cs, mdOpts)
	if err != nil {
		return err
	}
	r.setOutputs(cs, commentURL)

	var failed []string
	for _, rc := range cs.Releases {
		if rc.Error != "" {
			failed = append(failed, releaseKey(rc.Name, rc.Environment))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d releases could not be reviewed (%s): see the job summary", len(failed), len(cs.Releases), strings.Join(failed, ", "))
	}
	if r.cfg.failOnPrune && cs.Counts.Stale > 0 {
		return fmt.Errorf("%d objects would be pruned and fail-on-prune is set: a person has to approve deletions", cs.Counts.Stale)
	}
	return nil
}

func withLimit(o report.MarkdownOptions, limit int, summaryURL, hint string) report.MarkdownOptions {
	o.Limit, o.SummaryURL, o.CutHint = limit, summaryURL, hint
	return o
}

// reviewOptions are the review's options from the inputs.
func (r *runner) reviewOptions(refs []string) pipeline.ReviewOptions {
	opts := pipeline.ReviewOptions{
		Selection:    r.selection(""),
		Environments: r.cfg.environments,
		BaseRefs:     refs,
		Protection:   r.cfg.protection(),
	}
	if r.cfg.cacheKey != "" {
		opts.CacheKey = []byte(r.cfg.cacheKey)
	}
	return opts
}

// reviewShard reviews the shard input's part and writes it, sealed and
// redacted as anything published, as a partial review into partials-dir
// (output partial); the job that merges the parts comments.
func (r *runner) reviewShard(ctx context.Context) error {
	refs, err := r.baseRefs()
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		return fmt.Errorf("a sharded review needs a base to compare with; this push created its branch: review it unsharded")
	}
	opts := r.reviewOptions(refs)
	opts.Shard = r.cfg.shard
	if r.cfg.reviewPlanFile != "" {
		if opts.Split, err = pipeline.ReadSplit(r.cfg.reviewPlanFile); err != nil {
			return fmt.Errorf("input review-plan-file: %w", err)
		}
	}
	part, err := pipeline.ReviewShard(ctx, opts)
	if err != nil {
		return err
	}
	if line := report.RenderCacheLine(part.ChangeSet); line != "" {
		r.infof("%s", line)
	}
	part.ChangeSet = part.ChangeSet.Sealed(r.sealer)
	dir := r.cfg.partialsDir
	if dir == "" {
		dir = r.tempPath("opm-partials")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the partial review: %w", err)
	}
	name := filepath.Join(dir, fmt.Sprintf("review-%d-of-%d.json", part.Shard.Index, part.Shard.Count))
	b, err := json.MarshalIndent(part, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the partial review: %w", err)
	}
	if err := os.WriteFile(name, []byte(r.red.text(string(b))), 0o644); err != nil {
		return fmt.Errorf("writing the partial review: %w", err)
	}
	r.setOutput("partial", name)
	r.infof("shard %s: %d pairs reviewed, written to %s", part.Shard, len(part.ChangeSet.Releases), name)
	r.addSummary(fmt.Sprintf("### opm review, shard %s\n\n%d release/environment pairs reviewed; the merge job comments on the pull request.\n\n%s\n", part.Shard, len(part.ChangeSet.Releases), r.info.Footer()))
	return nil
}

// mergedReview reads every partial review in partials-dir and merges
// them into the one review.
func (r *runner) mergedReview() (*pipeline.ChangeSet, error) {
	names, err := filepath.Glob(filepath.Join(r.cfg.partialsDir, "*.json"))
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("partials-dir %s holds no partial review (*.json): download every shard's artifact into it", r.cfg.partialsDir)
	}
	cs, err := pipeline.MergeReviewFiles(names...)
	if err != nil {
		return nil, err
	}
	r.infof("merged %d partial reviews of %s", len(names), short(cs.BaseCommit))
	return cs, nil
}

// gitReview renders the merge base of the base ref and HEAD next to the
// working tree and compares them (pipeline.Review with BaseRefs, the same
// review `opm review --base` prints).
func (r *runner) gitReview(ctx context.Context) (*pipeline.ChangeSet, error) {
	refs, err := r.baseRefs()
	if err != nil {
		return nil, err
	}
	// Without refs there is no base: everything is added.
	cs, err := pipeline.Review(ctx, r.reviewOptions(refs))
	if err != nil {
		return nil, err
	}
	if cs.BaseCommit != "" {
		r.infof("Reviewed %s at HEAD against its merge base with %s, %s", r.cfg.path, cs.BaseRef, short(cs.BaseCommit))
	} else {
		r.infof("Reviewed %s: the push created its branch, so there is no base and every object is new", r.cfg.path)
	}
	// Whether actions/cache restored the render cache shows here.
	if line := report.RenderCacheLine(cs); line != "" {
		r.infof("%s", line)
	}
	// Paths relative to the workspace read better in a comment and do not
	// show the runner's layout.
	for i := range cs.Releases {
		cs.Releases[i].Error = strings.ReplaceAll(cs.Releases[i].Error, r.workspace+string(filepath.Separator), "")
	}
	return cs, nil
}

// baseRefs are the candidates for the base to compare with, in order;
// none means there is no base (a push that created a branch).
func (r *runner) baseRefs() ([]string, error) {
	switch {
	case r.cfg.baseRef != "":
		return pipeline.BaseRef(r.cfg.baseRef), nil
	case r.ev.pr != nil:
		// The payload's base SHA is exact; the branch is the fallback
		// when the checkout did not fetch that commit.
		return []string{r.ev.pr.baseSHA, "origin/" + r.ev.pr.baseRef, r.ev.pr.baseRef}, nil
	case r.ev.newBranch():
		return nil, nil
	case r.ev.name == "push":
		return []string{r.ev.before}, nil
	}
	return nil, fmt.Errorf("review mode on a %q event needs the base-ref input (the branch or commit to compare with)", r.ev.name)
}

// clusterDiff diffs the head against the live cluster per environment. An
// environment that cannot be diffed at all (its render fails) becomes one
// error row; a release whose cluster is unreachable is an error row of
// its own (pipeline.Diff), and the others are still compared.
func (r *runner) clusterDiff(ctx context.Context) (*pipeline.ChangeSet, error) {
	envs, err := r.environments(ctx)
	if err != nil {
		return nil, err
	}
	out := &pipeline.ChangeSet{Releases: []pipeline.ReleaseChanges{}}
	for _, env := range envs {
		cs, err := pipeline.Diff(ctx, pipeline.DiffOptions{
			Selection:      r.selection(env),
			ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
			Protection:     r.cfg.protection(),
		})
		if cs == nil {
			name := strings.Join(r.cfg.releases, ",")
			if name == "" {
				name = "(all releases)"
			}
			out.Releases = append(out.Releases, pipeline.ReleaseChanges{Name: name, Environment: env, Error: fmt.Sprint(err)})
			continue
		}
		// err repeats the releases' own Error fields; they are reported there.
		out.Releases = append(out.Releases, cs.Releases...)
		out.Counts.AddAll(cs.Counts)
	}
	return out, nil
}

// environments expands the environments input: empty means every one the
// deployment declares (none declared: render as written).
func (r *runner) environments(ctx context.Context) ([]string, error) {
	if len(r.cfg.environments) > 0 {
		// A group stands for its environments, in wave order, wherever
		// the input takes a list.
		fl, err := pipeline.Fleet(ctx, pipeline.Selection{Dir: r.dir(), Environment: strings.Join(r.cfg.environments, ",")})
		if err != nil {
			return nil, err
		}
		envs := make([]string, 0, len(fl))
		for _, e := range fl {
			envs = append(envs, e.Name)
		}
		return envs, nil
	}
	envs, err := pipeline.DeclaredEnvironments(ctx, r.dir())
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return []string{""}, nil
	}
	return envs, nil
}

// comment writes the review's sticky pull-request comment, when there is a
// pull request to comment on and a token that may; it returns the URL.
func (r *runner) comment(ctx context.Context, cs *pipeline.ChangeSet, mdOpts report.MarkdownOptions) (string, error) {
	marker := comment.Marker(fmt.Sprintf("%s/%s/%s", r.gh.Workflow, r.gh.Job, r.envKey()))
	mdOpts.Marker, mdOpts.SummaryURL, mdOpts.Footer = marker, r.runURL(), r.info.Footer()
	mdOpts.CutHint = fmt.Sprintf("The full review is in the [job summary](%s), and whole in the file of this step's `report` output (the docs' workflows upload it as the artifact `opm-review`).", r.runURL())
	return r.stickyComment(ctx, "review", marker, func() string { return report.Markdown(cs, mdOpts) })
}

// setOutputs writes digests and change-ids (JSON maps keyed
// <release>/<env>), stale-count, has-changes and comment-url.
func (r *runner) setOutputs(cs *pipeline.ChangeSet, commentURL string) {
	digests, changeIDs := map[string]string{}, map[string]string{}
	for _, rc := range cs.Releases {
		if rc.Error != "" || rc.Head.ChangeID == "" {
			continue
		}
		k := releaseKey(rc.Name, rc.Environment)
		digests[k], changeIDs[k] = rc.Head.ManifestDigest, rc.Head.ChangeID
	}
	r.setOutput("digests", mustJSON(digests))
	r.setOutput("change-ids", mustJSON(changeIDs))
	r.setOutput("stale-count", strconv.Itoa(cs.Counts.Stale))
	r.setOutput("has-changes", strconv.FormatBool(cs.Counts.Changed()))
	r.setOutput("comment-url", commentURL)
}

// logChangeSet prints one line per release in a log group.
func (r *runner) logChangeSet(cs *pipeline.ChangeSet) {
	r.action.Group(fmt.Sprintf("opm review: %d releases", len(cs.Releases)))
	defer r.action.EndGroup()
	for _, rc := range cs.Releases {
		k := releaseKey(rc.Name, rc.Environment)
		if rc.Error != "" {
			r.infof("%s: error: %s", k, rc.Error)
			continue
		}
		c := rc.Counts
		r.infof("%s: +%d ~%d -%d (%d unchanged), change %s", k, c.Added, c.Modified, c.Stale, c.Unchanged, rc.Head.ChangeID)
		for _, w := range rc.Warnings {
			r.action.Warningf("%s: %s", k, r.red.text(w))
		}
	}
}

func releaseKey(name, env string) string {
	if env == "" {
		return name
	}
	return name + "/" + env
}

// mustJSON encodes a string map; it cannot fail.
func mustJSON(m any) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
