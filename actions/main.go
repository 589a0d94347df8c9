// Command actions is the entrypoint of the opm GitHub Action (action.yml at
// the repository root). In review mode it renders the pull request's base
// and head (or, given a kubeconfig, diffs the head against the live
// cluster), writes the result to the job summary and to one sticky
// pull-request comment, and sets the outputs. In apply mode it applies the
// selected releases per environment and summarises what was applied and
// pruned.
//
// It is a thin front door: every decision about releases and objects is
// made by package pipeline. Inputs, outputs, masks, groups and the summary
// go through go-githubactions; the REST API through go-github, at
// GITHUB_API_URL so GitHub Enterprise Server works.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/opmodel/pipeline/buildinfo"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/pipeline"
	"github.com/opmodel/pipeline/pipeline/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, action, flush := newAction(ctx, os.Getenv, os.Stdout)
	ctx = pipeline.WithSession(ctx) // each file read once, one connection and discovery per cluster for the step
	err := guarded(func() error { return run(ctx, action, http.DefaultClient) })
	stop()
	if err != nil {
		action.Errorf("%s", err)
	}
	_ = flush()
	if err != nil {
		os.Exit(1)
	}
}

// guarded runs fn, turning a panic (a bug) into an error: its text then
// goes through the run's redactor like every other line, without a stack
// trace (whose argument words could show a short secret as a number).
// Worker goroutines raise their panics in the goroutine that waits for
// them (engine/workers), so this one recover sees them too.
func guarded(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("opm failed on an internal error (a bug; please report it with the workflow step that ran): %v", r)
		}
	}()
	return fn()
}

// newAction returns the Action's toolkit writing its log to w through the
// run's redactor (engine/redact), which ctx then carries: the seal key is
// read first, so the redactor seals with it from the first line on.
func newAction(ctx context.Context, getenv githubactions.GetenvFunc, w io.Writer) (context.Context, *githubactions.Action, func() error) {
	probe := githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(io.Discard))
	red := redact.New(pipeline.NewSealer(input(probe, "seal-key")))
	out := red.Writer(w)
	return redact.With(ctx, red), githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(out)), out.Flush
}

// config is the Action's inputs, parsed.
type config struct {
	path           string
	environments   []string // empty: every declared environment
	releases       []string
	mode           string
	baseRef        string
	kubeconfig     []byte
	context        string
	comment        bool
	token          string
	failOnPrune    bool
	noPrune        bool
	maxHistory     int
	force          bool
	forceConflicts bool
	// wait: apply mode waits for health (timeout).
	wait bool
	// takeOver is nil for the default take-over set.
	takeOver        []string
	pruneNamespaces bool
	prunePVCs       bool
	pruneCRDs       bool
	lockTimeout     time.Duration
	gateTimeout     time.Duration
	waveTimeout     time.Duration
	pruneGhosts     bool
	timeout         time.Duration
	// shard and partialsDir split a review across jobs; reviewTarget and
	// reviewMaxShards size it in plan mode.
	shard           *pipeline.Shard
	partialsDir     string
	reviewPlanFile  string
	reviewTarget    time.Duration
	reviewMaxShards int
	// rollbackTo and allowDifferentDigest are rollback mode's.
	rollbackTo           string
	allowDifferentDigest bool
	// issue and continueOnUnreachable are drift mode's.
	issue                 bool
	continueOnUnreachable bool
	// valuesSecret, sopsAgeKey, sealKey and cacheKey are secrets: masked in the log
	// before use, held in memory only.
	valuesSecret []byte
	sopsAgeKey   string
	sealKey      string
	cacheKey     string
}

// protection is what the prune-* inputs lift.
func (c *config) protection() pipeline.Protection {
	return pipeline.Protection{PruneNamespaces: c.pruneNamespaces, PrunePVCs: c.prunePVCs, PruneCRDs: c.pruneCRDs}
}

// run is the whole Action: read inputs and the event, do the mode's work,
// write summary, comment and outputs. The error it returns is what fails
// the step, and never contains kubeconfig material.
func run(ctx context.Context, action *githubactions.Action, httpClient *http.Client) error {
	cfg, err := readConfig(action)
	if err != nil {
		return err
	}
	// Mask before anything else can print: the runner then hides these
	// strings in the log, and red removes them from everything we write.
	base := redact.From(ctx)
	if base == nil {
		base = redact.New(pipeline.NewSealer(cfg.sealKey))
		ctx = redact.With(ctx, base)
	}
	red := newRedactor(base, cfg.kubeconfig)
	red.addSecretInputs(cfg.valuesSecret, cfg.sopsAgeKey, cfg.sealKey, cfg.cacheKey)
	for _, s := range red.secrets {
		action.AddMask(s)
	}
	red.register()
	gh, err := action.Context()
	if err != nil {
		return fmt.Errorf("reading the workflow context: %w", err)
	}
	r := &runner{action: action, cfg: cfg, gh: gh, ev: parseEvent(gh), red: red, http: httpClient, info: buildinfo.Read(),
		sealer: base.Sealer()}
	r.infof("%s", r.info)
	if r.workspace, err = workspace(action); err != nil {
		return err
	}
	switch cfg.mode {
	case "apply":
		err = r.apply(ctx)
	case "rollback":
		err = r.rollback(ctx)
	case "drift":
		err = r.drift(ctx)
	case "plan":
		err = r.plan(ctx)
	case "smoke":
		err = r.smoke(ctx)
	case "gates":
		err = r.gates(ctx)
	default:
		err = r.review(ctx)
	}
	if err != nil {
		// The reason goes to the summary too: it is what people open.
		r.addSummary(fmt.Sprintf("### ❌ opm %s failed\n\n%s\n%s\n", cfg.mode, fence(err.Error()), r.info.Footer()))
	}
	return red.error(err)
}

// runner carries one run's state between its steps.
type runner struct {
	action    *githubactions.Action
	cfg       config
	gh        *githubactions.GitHubContext
	ev        event
	red       *redactor
	http      *http.Client
	workspace string
	// info is this build of opm, for the log and the footers.
	info buildinfo.Info
	// sealer seals the digests and change IDs of releases holding secret
	// data in everything the run publishes (comment, summary, outputs).
	sealer *manifest.Sealer
}

// tempPath is name in the runner's temporary directory ($RUNNER_TEMP,
// one per job on GitHub's runners), for files later steps upload.
func (r *runner) tempPath(name string) string {
	return filepath.Join(cmp.Or(r.action.Getenv("RUNNER_TEMP"), os.TempDir()), name)
}

// selection is the inputs' selection in env, with the secret inputs.
func (r *runner) selection(env string) pipeline.Selection {
	sel := pipeline.Selection{Dir: r.dir(), Environment: env, Releases: r.cfg.releases}
	if len(r.cfg.valuesSecret) > 0 {
		sel.SecretValues = []pipeline.SecretValues{{Name: "values-secret", Data: r.cfg.valuesSecret}}
	}
	if r.cfg.sopsAgeKey != "" {
		sel.AgeKeys = []string{r.cfg.sopsAgeKey}
	}
	return sel
}

func readConfig(a *githubactions.Action) (config, error) {
	cfg := config{
		path:         cmp.Or(input(a, "path"), "."),
		environments: list(input(a, "environments")),
		releases:     list(input(a, "releases")),
		takeOver:     list(input(a, "take-over")),
		mode:         cmp.Or(input(a, "mode"), "review"),
		baseRef:      input(a, "base-ref"),
		kubeconfig:   []byte(input(a, "kubeconfig")),
		context:      input(a, "context"),
		token:        input(a, "github-token"),
		rollbackTo:   input(a, "rollback-to"),
		valuesSecret: []byte(input(a, "values-secret")),
		sopsAgeKey:   strings.TrimSpace(input(a, "sops-age-key")),
		sealKey:      input(a, "seal-key"),
		cacheKey:     input(a, "cache-key"),
	}
	if !slices.Contains([]string{"review", "apply", "smoke", "rollback", "drift", "plan", "gates"}, cfg.mode) {
		return cfg, fmt.Errorf("input mode must be review, apply, smoke, rollback, drift, plan or gates, not %q", cfg.mode)
	}
	if v := input(a, "shard"); v != "" {
		sh, err := pipeline.ParseShard(v)
		if err != nil {
			return cfg, fmt.Errorf("input shard: %w", err)
		}
		cfg.shard = sh
	}
	cfg.partialsDir = input(a, "partials-dir")
	cfg.reviewPlanFile = input(a, "review-plan-file")
	cfg.reviewMaxShards = 16
	if v := input(a, "review-max-shards"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("input review-max-shards must be a whole number ≥ 1, not %q", v)
		}
		cfg.reviewMaxShards = n
	}
	// Durations: the default when empty; zero only where it means "do
	// not wait".
	durations := []struct {
		name, want string
		def        time.Duration
		zero       bool
		dst        *time.Duration
	}{
		{"review-target", "a positive duration such as 5m", 5 * time.Minute, false, &cfg.reviewTarget},
		{"timeout", "a duration such as 5m", 0, false, &cfg.timeout},
		{"lock-timeout", "a duration such as 5m or 0", 5 * time.Minute, true, &cfg.lockTimeout},
		{"gate-timeout", "a duration such as 60m or 0", 0, true, &cfg.gateTimeout},
		{"wave-timeout", "a positive duration such as 5m", 5 * time.Minute, false, &cfg.waveTimeout},
	}
	for _, d := range durations {
		*d.dst = d.def
		v := input(a, d.name)
		if v == "" {
			continue
		}
		p, err := time.ParseDuration(v)
		if err != nil || p < 0 || (p == 0 && !d.zero) {
			return cfg, fmt.Errorf("input %s must be %s, not %q", d.name, d.want, v)
		}
		*d.dst = p
	}
	bools := []struct {
		name string
		def  bool
		dst  *bool
	}{
		{"comment", true, &cfg.comment},
		{"fail-on-prune", false, &cfg.failOnPrune},
		{"no-prune", false, &cfg.noPrune},
		{"force", false, &cfg.force},
		{"force-conflicts", false, &cfg.forceConflicts},
		{"wait", true, &cfg.wait},
		{"prune-namespaces", false, &cfg.pruneNamespaces},
		{"prune-pvcs", false, &cfg.prunePVCs},
		{"prune-crds", false, &cfg.pruneCRDs},
		{"prune-ghosts", false, &cfg.pruneGhosts},
		{"allow-different-digest", false, &cfg.allowDifferentDigest},
		{"issue", true, &cfg.issue},
		{"continue-on-unreachable", false, &cfg.continueOnUnreachable},
	}
	for _, b := range bools {
		v := input(a, b.name)
		if v == "" {
			*b.dst = b.def
			continue
		}
		p, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("input %s must be true or false, not %q", b.name, v)
		}
		*b.dst = p
	}
	if v := input(a, "max-history"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("input max-history must be a whole number of at least 1, not %q", v)
		}
		cfg.maxHistory = n
	}
	return cfg, nil
}

// input reads an input. A composite action passes inputs through env:,
// where a name with '-' is awkward, so INPUT_GITHUB_TOKEN counts for
// github-token as well as INPUT_GITHUB-TOKEN (what a runner sets itself).
func input(a *githubactions.Action, name string) string {
	if v := a.GetInput(name); v != "" {
		return v
	}
	return a.GetInput(strings.ReplaceAll(name, "-", "_"))
}

// list splits a comma (or newline) separated input, dropping blanks and
// repeats.
func list(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// workspace is where relative paths count from: the runner's checkout.
func workspace(a *githubactions.Action) (string, error) {
	if ws := a.Getenv("GITHUB_WORKSPACE"); ws != "" {
		return ws, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the working directory: %w", err)
	}
	return wd, nil
}

// dir is the deployment directory as an absolute path.
func (r *runner) dir() string {
	if filepath.IsAbs(r.cfg.path) {
		return filepath.Clean(r.cfg.path)
	}
	return filepath.Join(r.workspace, r.cfg.path)
}

// envKey names the environments in the comment key and logs.
func (r *runner) envKey() string {
	if len(r.cfg.environments) == 0 {
		return "all"
	}
	envs := slices.Clone(r.cfg.environments)
	slices.Sort(envs)
	return strings.Join(envs, ",")
}

// runURL is the page of this run, where the job summary is shown.
func (r *runner) runURL() string {
	server, repo, id := r.gh.ServerURL, r.gh.Repository, r.gh.RunID
	if server == "" || repo == "" || id == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%s/actions/runs/%d", strings.TrimSuffix(server, "/"), repo, id)
}

func (r *runner) infof(format string, args ...any) {
	r.action.Infof("%s", r.red.text(fmt.Sprintf(format, args...)))
}

// setOutput writes an output, or logs it when the step has no
// GITHUB_OUTPUT (go-githubactions would panic).
func (r *runner) setOutput(name, value string) {
	value = r.red.text(value)
	if r.action.Getenv("GITHUB_OUTPUT") == "" {
		r.infof("output %s=%s", name, value)
		return
	}
	r.action.SetOutput(name, value)
}

// summaryLimit keeps the step summary under GitHub's 1 MiB per step,
// with room for the runner's own framing.
const summaryLimit = report.SummaryMarkdownLimit

// addSummary appends to the job summary when the step has one.
func (r *runner) addSummary(md string) {
	if r.action.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	r.action.AddStepSummary(r.red.text(md))
}
