package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/engine/gitref"
	"github.com/opmodel/pipeline/pipeline"
)

// review runs review mode: the change set, the job summary, the sticky
// comment and the outputs; then fails on errors and, if asked, on prunes.
func (r *runner) review(ctx context.Context) error {
	var (
		cs     *pipeline.ChangeSet
		err    error
		mdOpts pipeline.MarkdownOptions
	)
	if len(r.cfg.kubeconfig) > 0 {
		mdOpts = pipeline.MarkdownOptions{Title: "opm diff", BaseLabel: "live", HeadLabel: "render"}
		cs, err = r.clusterDiff(ctx)
	} else {
		mdOpts = pipeline.MarkdownOptions{Title: "opm review"}
		cs, err = r.gitReview(ctx)
	}
	if err != nil {
		return err
	}
	r.logChangeSet(cs)

	summary := cs.Markdown(withLimit(mdOpts, summaryLimit, "", "Render both refs locally with `opm render` for the full diffs."))
	r.addSummary(summary)

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

func withLimit(o pipeline.MarkdownOptions, limit int, summaryURL, hint string) pipeline.MarkdownOptions {
	o.Limit, o.SummaryURL, o.CutHint = limit, summaryURL, hint
	return o
}

// gitReview renders the merge base of the base ref and HEAD next to the
// working tree and compares them.
func (r *runner) gitReview(ctx context.Context) (*pipeline.ChangeSet, error) {
	dir := r.dir()
	repo, err := gitref.Root(ctx, dir)
	if err != nil {
		return nil, err
	}
	// BaseDir stays empty when there is no base: everything is added.
	opts := pipeline.ReviewOptions{
		Selection:    pipeline.Selection{Dir: dir, Releases: r.cfg.releases},
		Environments: r.cfg.environments,
		Protection:   pipeline.Protection{PruneNamespaces: r.cfg.pruneNamespaces, PrunePVCs: r.cfg.prunePVCs},
	}
	base, err := r.baseCommit(ctx, repo)
	if err != nil {
		return nil, err
	}
	// Errors name files by absolute path; in a comment, paths relative to
	// the repository read better and do not show the runner's layout.
	prefixes := []string{repo + string(filepath.Separator), r.workspace + string(filepath.Separator)}
	if base != "" {
		wt, err := gitref.Checkout(ctx, repo, base)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := wt.Close(context.WithoutCancel(ctx)); err != nil {
				r.action.Warningf("%s", err)
			}
		}()
		rel, err := relPath(repo, dir)
		if err != nil {
			return nil, err
		}
		opts.BaseDir = filepath.Join(wt.Dir, rel)
		prefixes = append(prefixes, wt.Dir+string(filepath.Separator))
		r.infof("Reviewing %s at HEAD against its merge base %s", r.cfg.path, short(base))
	} else {
		r.infof("Reviewing %s: the push created its branch, so there is no base and every object is new", r.cfg.path)
	}
	cs, err := pipeline.Review(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range cs.Releases {
		for _, p := range prefixes {
			cs.Releases[i].Error = strings.ReplaceAll(cs.Releases[i].Error, p, "")
		}
	}
	return cs, nil
}

// baseCommit picks the commit to compare with: the merge base of the base
// ref and HEAD. "" means there is none (a push that created a branch).
func (r *runner) baseCommit(ctx context.Context, repo string) (string, error) {
	var candidates []string
	switch {
	case r.cfg.baseRef != "":
		candidates = []string{r.cfg.baseRef, "origin/" + r.cfg.baseRef}
	case r.ev.pr != nil:
		// The payload's base SHA is exact; the branch is the fallback
		// when the checkout did not fetch that commit.
		candidates = []string{r.ev.pr.baseSHA, "origin/" + r.ev.pr.baseRef, r.ev.pr.baseRef}
	case r.ev.newBranch():
		return "", nil
	case r.ev.name == "push":
		candidates = []string{r.ev.before}
	default:
		return "", fmt.Errorf("review mode on a %q event needs the base-ref input (the branch or commit to compare with)", r.ev.name)
	}
	var errs []error
	for _, c := range candidates {
		if c == "" || c == "origin/" {
			continue
		}
		commit, err := gitref.Resolve(ctx, repo, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return gitref.MergeBase(ctx, repo, commit, "HEAD")
	}
	return "", fmt.Errorf("finding the base to review against: %w", errors.Join(errs...))
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
			Selection:      pipeline.Selection{Dir: r.dir(), Environment: env, Releases: r.cfg.releases},
			ClusterOptions: pipeline.ClusterOptions{KubeconfigData: r.cfg.kubeconfig, Context: r.cfg.context},
			Protection:     pipeline.Protection{PruneNamespaces: r.cfg.pruneNamespaces, PrunePVCs: r.cfg.prunePVCs},
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
		return r.cfg.environments, nil
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

// comment writes the sticky pull-request comment, when there is a pull
// request to comment on and a token that may; it returns the comment's URL.
func (r *runner) comment(ctx context.Context, cs *pipeline.ChangeSet, mdOpts pipeline.MarkdownOptions) (string, error) {
	if !r.cfg.comment || r.ev.pr == nil {
		return "", nil
	}
	pr := r.ev.pr
	switch {
	case pr.fork() && r.ev.name == "pull_request":
		r.action.Noticef("This pull request comes from the fork %s, whose token is read-only: the review is in the job summary, not in a comment.", pr.headRepo)
		return "", nil
	case r.cfg.token == "":
		r.action.Noticef("No github-token: the review is in the job summary, not in a comment.")
		return "", nil
	}
	owner, repo := r.gh.Repo()
	client, err := comment.NewClient(r.http, r.gh.APIURL, r.cfg.token)
	if err != nil {
		return "", err
	}
	marker := comment.Marker(fmt.Sprintf("%s/%s/%s", r.gh.Workflow, r.gh.Job, r.envKey()))
	mdOpts.Marker = marker
	body := r.red.text(cs.Markdown(withLimit(mdOpts, 0, r.runURL(), "")))
	res, err := comment.Upsert(ctx, client, comment.Target{Owner: owner, Repo: repo, Number: pr.number}, marker, body)
	if comment.IsForbidden(err) {
		r.action.Warningf("The token may not comment on this pull request (give the job `permissions: pull-requests: write`): the review is in the job summary. %s", r.red.text(err.Error()))
		return "", nil
	}
	if err != nil {
		return "", err
	}
	verb := "Updated"
	if res.Created {
		verb = "Created"
	}
	r.infof("%s the review comment %s", verb, res.URL)
	return res.URL, nil
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
func mustJSON(m map[string]string) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// relPath is dir relative to repo, resolving symlinks on both (macOS
// runners' /var → /private/var).
func relPath(repo, dir string) (string, error) {
	rr, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", repo, err)
	}
	dr, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("resolving the deployment directory %s: %w", dir, err)
	}
	rel, err := filepath.Rel(rr, dr)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("the deployment directory %s is not inside the repository %s", dir, repo)
	}
	return rel, nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
