// Package render turns a deployment directory into rendered releases: it
// selects releases and an environment, merges values (module < release <
// environment < -f files), validates them against the module's #config,
// matches the providers' transformers to every component of the OPM
// component model (by label, resource and trait FQN), runs their #transform,
// and computes the manifest digest and change ID.
//
// It never talks to a cluster. Every error about the user's input is a
// fault.Validation error that names the release, environment or file and
// carries CUE positions.
package render

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"

	"github.com/opmodel/pipeline/engine/cache"
	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/fault"
	"github.com/opmodel/pipeline/engine/fingerprint"
	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/opmv2"
	"github.com/opmodel/pipeline/engine/reads"
	"github.com/opmodel/pipeline/engine/redact"
	"github.com/opmodel/pipeline/engine/suggest"
	"github.com/opmodel/pipeline/engine/taint"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/engine/workers"
)

// Options select what to render.
type Options struct {
	// Dir is the deployment directory.
	Dir string
	// Environment unifies every release with `#environment: environments[Environment]`.
	// Empty renders releases as written.
	Environment string
	// Releases selects releases by their key in `releases`; empty means all.
	Releases []string
	// ValuesFiles are merged last, in order; they need exactly one release.
	ValuesFiles []string
	// Values are in-memory values files (secret inputs), merged after
	// ValuesFiles; they need exactly one release too.
	Values []values.Input
	// Keys decrypt SOPS-encrypted values files; empty, keys are looked for
	// where the sops CLI looks (SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, …).
	Keys encrypted.Keys
	// IdentityOnly stops after a release's identity and metadata: no values
	// merge, no transformers, no Resources, digest or change ID. Status and
	// delete need no more, and skipping the transformers is most of the cost.
	IdentityOnly bool
	// Namespace, when set, replaces every selected release's namespace —
	// even one the release sets itself — before identity and objects are
	// computed, so the release id and every namespaced object follow it.
	// Smoke tests use it to deploy into a throwaway namespace.
	Namespace string
	// Parallelism bounds how many releases render at once (each holds a
	// CUE context of its own); one per core when < 1, 1 renders them one
	// after the other.
	Parallelism int
	// VerifyInputs traces every file the render reads (engine/reads) and
	// fails it when one is not covered by the selected releases' input
	// fingerprints: the safety net under every skip (OPM_VERIFY_INPUTS).
	VerifyInputs bool
	// Loads, when set, shares loaded deployments between the renders of
	// one command (load.Memo): an apply's identities, then its objects.
	Loads *load.Memo
	// Cache, when set, keeps what each component transformed into, so a
	// render transforms only the components whose inputs moved (see
	// transforms); VerifyCache transforms every hit anyway and fails a
	// render whose hit differs (OPM_VERIFY_SKIPS).
	Cache       *cache.Cache
	VerifyCache bool
	// reads is the trace VerifyInputs records into.
	reads *reads.Set
	// untraced skips the second render that finds what secrets reach
	// (traceSecrets): only for measuring what it costs.
	untraced bool
	// wholeStandIns transforms every component again in the stand-in
	// renders, reusing none: what tests set the reuse against.
	wholeStandIns bool
	// shareLeast replaces componentsPerWorker: tests share a few
	// components out to compare the result with a render that does not.
	shareLeast int
	// stats counts the components the real render transformed (not
	// taken from Cache) and the entries written: what tests check the
	// cache against.
	stats *transformStats
}

var (
	pathEnvironment = cue.MakePath(cue.Def("#environment"))
	pathModule      = cue.MakePath(cue.Def("#module"))
	pathConfig      = cue.MakePath(cue.Def("#config"))
	pathComponents  = cue.MakePath(cue.Def("#components"))
	pathProvider    = cue.MakePath(cue.Def("#KubernetesProvider"))
)

// Render loads dir and renders the selected releases, sorted by key.
// Several releases render concurrently, one per core, each goroutine with
// its own loaded deployment (its own CUE context); the result is the same
// as rendering them one after the other.
func Render(ctx context.Context, opts Options) ([]*Release, error) {
	if opts.VerifyInputs && opts.reads == nil {
		opts.reads = reads.New()
		rels, err := Render(ctx, opts)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(rels))
		for _, r := range rels {
			keys = append(keys, r.Key)
		}
		return rels, verifyReads(ctx, opts, keys)
	}
	// A selection of releases evaluates only what they reach.
	lo := load.Options{Pruned: fingerprint.PrunedRoot(ctx, opts.Dir, opts.Releases, nil), Reads: opts.reads}
	// One release: its components take every core. Several: each release
	// takes one.
	cores, least := workers.Count(math.MaxInt, opts.Parallelism), cmp.Or(opts.shareLeast, componentsPerWorker)
	cut := &moduleCut{releases: opts.Releases, least: least}
	if !opts.IdentityOnly && cores > 1 && !opts.Loads.Holds(opts.Dir, lo) {
		// Its module's components need not be evaluated here
		// (moduleCut). A load the command made before (its identities)
		// has evaluated them already; a cut load is never kept for
		// another render.
		lo.Edit = cut.edit
	}
	d, err := opts.Loads.LoadWith(ctx, opts.Dir, lo)
	if cut.done {
		if err == nil {
			rels, err := renderCut(ctx, d, opts, cut, cores, least)
			if err == nil || errors.Is(err, errCacheDiffers) {
				return rels, err
			}
		}
		// Whatever went wrong, the deployment as written says it.
		lo.Edit = nil
		d, err = load.LoadWith(ctx, opts.Dir, lo)
	}
	if err != nil {
		return nil, err
	}
	p, err := prepare(ctx, d, opts)
	if err != nil {
		return nil, err
	}
	if !opts.IdentityOnly && len(p.keys) == 1 {
		p.share.workers, p.share.least = cores, least
	}
	// Identity alone costs less than loading the deployment again.
	if opts.IdentityOnly || workers.Count(len(p.keys), opts.Parallelism) == 1 {
		return p.renderAll(ctx)
	}
	out := make([]*Release, len(p.keys))
	err = workers.Each(ctx, opts.Parallelism, len(p.keys), func(ctx context.Context, worker int) (*plan, error) {
		if worker == 0 {
			return p, nil
		}
		dw, err := load.LoadWith(ctx, opts.Dir, lo)
		if err != nil {
			return nil, err
		}
		return prepare(ctx, dw, opts)
	}, func(ctx context.Context, pw *plan, i int) error {
		r, err := pw.render(p.keys[i])
		out[i] = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// renderCut renders the one release of d, a deployment whose module's
// components were cut away (moduleCut), sharing them out; any error says
// only that it could not, and the caller renders the deployment as
// written.
func renderCut(ctx context.Context, d *load.Deployment, opts Options, cut *moduleCut, cores, least int) ([]*Release, error) {
	counted := opts.stats
	opts.stats = &transformStats{}
	p, err := prepare(ctx, d, opts)
	if err == nil && (len(p.keys) != 1 || p.keys[0] != cut.key) {
		err = errCut
	}
	var rels []*Release
	if err == nil {
		p.share.workers, p.share.least, p.share.names = cores, least, cut.names
		rels, err = p.renderAll(ctx)
	}
	if err != nil {
		counted.count(func(s *transformStats) *atomic.Int64 { return &s.uncut })
		return nil, err
	}
	opts.stats.cut.Add(1)
	counted.add(opts.stats)
	return rels, nil
}

// Session renders from one loaded deployment call after call, as a review
// renders each release of a side in each environment on its own: what
// every render in an environment shares, its providers' transformers, is
// read once per environment, not once per call (reading them again was
// about a tenth of a review's CPU). Like its deployment, a Session is for
// one goroutine at a time.
type Session struct {
	d    *load.Deployment
	memo *perEnvironment
}

// perEnvironment is what every render in an environment shares, read
// once per environment of a Session.
type perEnvironment struct {
	transformers map[string][]transformer
	// platforms are the environments' OPM v2 platforms: their catalogs
	// fetched and built (about 0.3 s each), not once per release.
	platforms map[string]*opmv2.Platform
}

// NewSession starts rendering from d.
func NewSession(d *load.Deployment) *Session {
	return &Session{d: d, memo: &perEnvironment{transformers: map[string][]transformer{}, platforms: map[string]*opmv2.Platform{}}}
}

// Deployment is the deployment the session renders from.
func (s *Session) Deployment() *load.Deployment { return s.d }

// Render is FromDeployment for the session's deployment.
func (s *Session) Render(ctx context.Context, opts Options) ([]*Release, error) {
	p, err := prepareWith(ctx, s.d, opts, s.memo)
	if err != nil {
		return nil, err
	}
	return p.renderAll(ctx)
}

// plan is what every release of one render shares: the selection, the
// environment, values files and transformers, all in d's CUE context.
type plan struct {
	ctx          context.Context // for loading again (the blueprint workaround)
	d            *load.Deployment
	opts         Options
	keys         []string
	env          cue.Value
	files        []*values.Set
	envFiles     map[string][]*values.Set // by release key, "" for all
	transformers []transformer
	platform     *opmv2.Platform // the environment's, for OPM v2 modules
	// share is how a release's components are shared out: to every core
	// when one release renders, none when releases render side by side.
	share sharing
}

func prepare(ctx context.Context, d *load.Deployment, opts Options) (*plan, error) {
	return prepareWith(ctx, d, opts, nil)
}

// prepareWith is prepare reusing, and recording in memo (when not nil),
// the transformers and the platform read for an environment of d.
func prepareWith(ctx context.Context, d *load.Deployment, opts Options, memo *perEnvironment) (*plan, error) {
	keys, err := selectReleases(d, opts.Releases)
	if err != nil {
		return nil, err
	}
	if len(opts.ValuesFiles)+len(opts.Values) > 0 && len(keys) != 1 {
		return nil, fault.Validationf("-f values files apply to exactly one release, but %d are selected (%s): add --release NAME", len(keys), strings.Join(keys, ", "))
	}
	p := &plan{ctx: ctx, d: d, opts: opts, keys: keys}
	if opts.Environment != "" {
		if p.env, err = selectEnvironment(d, opts.Environment); err != nil {
			return nil, err
		}
		if !opts.IdentityOnly {
			if p.envFiles, err = p.envValuesFiles(); err != nil {
				return nil, err
			}
		}
	}
	inputs := make([]values.Input, 0, len(opts.ValuesFiles)+len(opts.Values))
	for _, f := range opts.ValuesFiles {
		inputs = append(inputs, values.Input{Name: f})
		opts.reads.Add(f)
	}
	for i, in := range append(inputs, opts.Values...) {
		s, err := values.Read(d.Context, in, opts.Keys)
		if err != nil {
			if i < len(opts.ValuesFiles) && errors.Is(err, fs.ErrNotExist) {
				// Said in the words of the flag that named it.
				return nil, fault.Validationf("values file %q (-f/--values) does not exist: the path is relative to the working directory, not to the deployment directory; check it, or drop the flag", in.Name)
			}
			return nil, fault.Wrap(readKind(err), err)
		}
		p.files = append(p.files, s)
	}
	if !opts.IdentityOnly {
		var ts []transformer
		ok := false
		if memo != nil {
			ts, ok = memo.transformers[opts.Environment]
		}
		if !ok {
			providers, where, err := selectProviders(d, p.env)
			if err != nil {
				return nil, err
			}
			if ts, err = loadTransformers(providers); err != nil {
				return nil, fmt.Errorf("loading %s: %w", where, err)
			}
			p.share.catalogProvider = where == catalogProviderWhere
			if memo != nil {
				memo.transformers[opts.Environment] = ts
			}
		}
		p.transformers = ts
		if p.env.Exists() {
			platform, ok := (*opmv2.Platform)(nil), false
			if memo != nil {
				platform, ok = memo.platforms[opts.Environment]
			}
			if !ok {
				if platform, err = loadPlatform(ctx, d, declaredOr(d, opts.Environment, p.env)); err != nil {
					return nil, fmt.Errorf("environment %q: %w", opts.Environment, err)
				}
				if memo != nil {
					memo.platforms[opts.Environment] = platform
				}
			}
			p.platform = platform
		}
	}
	return p, nil
}

// declaredOr is the environment as the deployment declares it (a release
// cannot change its platform), or env.
func declaredOr(d *load.Deployment, name string, env cue.Value) cue.Value {
	if declared, ok := declaredEnvironment(d, name); ok {
		return declared
	}
	return env
}

func (p *plan) renderAll(ctx context.Context) ([]*Release, error) {
	out := make([]*Release, 0, len(p.keys))
	for _, key := range p.keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := p.render(key)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// render renders one release; one that fails only because of CUE v0.17's
// blueprint closedness regression is rendered again with the workaround.
func (p *plan) render(key string) (*Release, error) {
	r, err := p.renderOnce(key)
	var bre *blueprintRegressionError
	if err != nil && errors.As(err, &bre) && !p.d.RelaxedClosedness && p.share.names == nil {
		r, err = p.withBlueprintWorkaround(key, bre.bp)
	}
	if err == nil {
		register(p.ctx, r)
	}
	return r, err
}

func (p *plan) renderOnce(key string) (*Release, error) {
	rel, err := releaseValue(p.d, key, p.env, p.opts.Namespace)
	if err != nil {
		return nil, err
	}
	mode := tracing{on: !p.opts.untraced, whole: p.opts.wholeStandIns, transforms: cacheUse{cache: p.opts.Cache, verify: p.opts.VerifyCache, stats: p.opts.stats}, share: p.share}
	return renderRelease(p.ctx, p.d, key, rel, p.filesFor(key), p.transformers, p.platform, p.opts.IdentityOnly, mode)
}

// releaseValue is releases[key] of d as a render evaluates it: in
// namespace ns when it is not empty (Options.Namespace), unified with env
// when env exists.
func releaseValue(d *load.Deployment, key string, env cue.Value, ns string) (cue.Value, error) {
	var err error
	rel := d.Root.LookupPath(cue.MakePath(cue.Str("releases"), cue.Str(key)))
	if ns != "" {
		if rel, err = withNamespace(d, key, rel, ns); err != nil {
			return cue.Value{}, err
		}
	}
	if env.Exists() {
		rel = rel.FillPath(pathEnvironment, env)
	}
	return rel, nil
}

func selectReleases(d *load.Deployment, want []string) ([]string, error) {
	all, err := load.FieldNames(d.Root.LookupPath(cue.ParsePath("releases")))
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("reading releases:\n%s", load.Describe(err)))
	}
	if len(want) == 0 {
		if len(all) == 0 {
			return nil, fault.Validationf("%s declares no releases", d.Dir)
		}
		return all, nil
	}
	var keys []string
	for _, w := range want {
		if !slices.Contains(all, w) {
			return nil, fault.Validationf("release %q is not declared in %s; %sreleases: %s", w, d.Dir, hint(w, all), strings.Join(all, ", "))
		}
		if !slices.Contains(keys, w) {
			keys = append(keys, w)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// hint is "did you mean …?; " for a mistyped name, or "".
func hint(name string, known []string) string {
	if s := suggest.DidYouMean(name, known); s != "" {
		return s + " "
	}
	return ""
}

// ErrUndeclaredEnvironment is what errors.Is finds in a render's error
// when the environment selected is not declared: the name may be a group
// of the fleet, which a front door routes to instead.
var ErrUndeclaredEnvironment = errors.New("environment not declared")

// undeclared is an error that Is ErrUndeclaredEnvironment, its text and
// kind unchanged.
type undeclared struct{ error }

func (e undeclared) Is(target error) bool { return target == ErrUndeclaredEnvironment }
func (e undeclared) Unwrap() error        { return e.error }

func selectEnvironment(d *load.Deployment, name string) (cue.Value, error) {
	envs := d.Root.LookupPath(cue.ParsePath("environments"))
	all, _ := load.FieldNames(envs)
	if !slices.Contains(all, name) {
		known := "none are declared"
		if len(all) > 0 {
			known = "environments: " + strings.Join(all, ", ")
		}
		return cue.Value{}, undeclared{fault.Validationf("environment %q is not declared in %s; %s%s", name, d.Dir, hint(name, all), known)}
	}
	env := envs.LookupPath(cue.MakePath(cue.Str(name)))
	if err := env.Validate(); err != nil {
		return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("environment %q is invalid:\n%s", name, load.Describe(err)))
	}
	return env, nil
}

// declaredByUser reports whether v has a field, or is written somewhere
// outside the embedded catalog (whose schemas declare it for everyone).
func declaredByUser(v cue.Value) bool {
	if names, _ := load.FieldNames(v); len(names) > 0 {
		return true
	}
	op, conjuncts := v.Expr()
	if op != cue.AndOp {
		conjuncts = []cue.Value{v}
	}
	for _, c := range conjuncts {
		if p := c.Pos(); p.IsValid() && !strings.HasPrefix(p.Filename(), load.EmbeddedRoot) {
			return true
		}
	}
	return false
}

// releasePos is where the user declared releases[key].
func releasePos(d *load.Deployment, key string) string {
	return cmp.Or(d.DeclPos("releases", key), "releases."+key)
}

// tracing says whether a render traces its secrets (on), whether its
// stand-in renders transform every component again (whole) rather than
// reuse those the stand-ins do not reach, which cache keeps its
// components' transforms (Options.Cache, VerifyCache), and how its
// components are shared out to other cores (share).
type tracing struct {
	on, whole  bool
	transforms cacheUse
	share      sharing
}

func renderRelease(ctx context.Context, d *load.Deployment, key string, rel cue.Value, files []*values.Set, transformers []transformer, platform *opmv2.Platform, identityOnly bool, trace tracing) (out *Release, err error) {
	where := fmt.Sprintf("release %q", key)
	envName := ""
	if e := rel.LookupPath(pathEnvironment); e.Exists() {
		envName, _ = e.LookupPath(cue.ParsePath("metadata.name")).String()
		where += fmt.Sprintf(" in environment %q", envName)
	}
	// The environment's policy, as the deployment declares it; a release
	// that changes it is refused before anything else is said about it.
	policySrc := rel.LookupPath(pathEnvironment)
	if declared, ok := declaredEnvironment(d, envName); ok {
		if err := checkPolicyUntouched(d, key, envName, rel, declared); err != nil {
			return nil, err
		}
		policySrc = declared
	}
	if err := rel.Validate(cue.Hidden(true)); err != nil {
		if bp := detectBlueprintRegression(err, rel); bp != nil {
			return nil, &blueprintRegressionError{bp: bp, err: fault.Wrap(fault.Validation,
				fmt.Errorf("%s is invalid: %s\n%s", where, bp.hint(), describeRelease(err, rel, envName)))}
		}
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s is invalid:\n%s", where, describeRelease(err, rel, envName)))
	}
	if !concrete(rel.LookupPath(pathModule).LookupPath(cue.ParsePath("metadata.name"))) {
		return nil, fault.Validationf("%s (at %s) has no module: set #module to an imported module, e.g.\n"+
			"      import %smod \"<your module path>/modules/%s\"\n"+
			"      releases: %s: #module: %smod\n"+
			"  (a module needs metadata.name, .version and .fqn: write it with core.#Module)", where, releasePos(d, key), key, key, key, key)
	}
	if !concrete(rel.LookupPath(cue.ParsePath("metadata.namespace"))) {
		hint := "set metadata.namespace in the release, or render with --env and an environment that sets namespace"
		return nil, fault.Validationf("%s has no namespace (at %s): %s", where, rel.Pos(), hint)
	}
	meta, err := readMetadata(rel)
	if err != nil {
		return nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: %w", where, err))
	}
	r := &Release{Key: key, Name: meta.name, Namespace: meta.namespace, Environment: envName, ReleaseID: meta.identity, Module: meta.module}
	if envName != "" {
		r.Cluster = clusterOf(policySrc)
		if r.Reach, err = reachOf(policySrc, envName, meta.namespace); err != nil {
			return nil, policyError(envName, err)
		}
	}
	if identityOnly {
		return r, nil
	}

	var secrets []string
	for _, f := range files {
		secrets = append(secrets, f.Secrets()...)
	}
	cut := trace.share.names != nil
	if len(secrets) > 0 && !cut {
		// Whatever fails from here on may quote a value, or a value a
		// function derived from one (an upper-cased copy, a prefix, a
		// product): the same render with stand-ins says which.
		defer func() {
			if err != nil {
				msg := err.Error()
				if !errors.As(err, new(quotesNoValue)) {
					msg = redactDerived(msg, standInFailure(ctx, d, key, rel, files, transformers, platform))
				}
				all := append(slices.Clone(r.Secrets), secrets...)
				slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) }) // longest first
				err = fault.Wrap(fault.KindOf(err), errors.New(values.Redact(msg, all)))
				out = nil
			}
		}()
	}
	effective, set, err := effectiveValues(d, rel, where, key, envName, files)
	if err != nil {
		return nil, err
	}
	r.set = set
	if set.HasSecrets() {
		r.Secrets = set.Secrets()
	}
	// The module filled with the effective values evaluates every
	// component: only a render that is not shared out needs it (and a
	// shared one, to say where a broken reference is written).
	comps := sync.OnceValues(func() (cue.Value, error) {
		if cut {
			return cue.Value{}, errCut
		}
		return moduleComponents(rel, effective, where, r.Module.Path)
	})
	rc := releaseContext{release: meta, env: rel.LookupPath(cue.MakePath(cue.Def("#environment"), cue.Str("metadata"))), platform: platform, values: effective}
	rc.transforms = trace.transforms
	if set.HasSecrets() {
		rc.transforms.cache = nil // never a release with secret values: the cache holds no secret
	}
	limit := r.Reach
	var names []string
	var specs map[string]componentSpec
	run := trace.share.plan(d, key, set, rel, rc)
	if run == nil && cut {
		return nil, errCut
	}
	if run != nil {
		if r.Resources, specs, err = run.render(ctx, d, transformers, limit, where); err == nil {
			names = run.names
			rc.transforms.stats.count(sharedCount)
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		} else if errors.Is(err, errCacheDiffers) {
			return nil, err // a wrong answer is never healed quietly
		} else {
			// Rendered again on this goroutine alone, whose message it gives.
			run = nil
			rc.transforms.stats.count(wholeCount)
		}
	}
	v2 := false
	if run == nil {
		all, err := comps()
		if err != nil {
			return nil, err
		}
		var v2warnings []string
		if v2 = opmv2.IsModule(all); v2 {
			rc.moduleInstance = moduleInstanceOf(d)
			rc.warnings = &v2warnings
		}
		if r.Resources, err = renderComponents(d.Context, all, rc, transformers, d.Catalog, limit, where); err != nil {
			return nil, err
		}
		r.Warnings = append(r.Warnings, v2warnings...)
		rc.warnings = nil // the stand-in renders after this one say the same
		if !v2 {
			names, _ = load.FieldNames(all)
			specs = specsOf(all, names)
		}
	}
	broken, warnings := checkReferences(specs, names, comps)
	for _, n := range names {
		if p := broken[n]; len(p) > 0 {
			return nil, fault.Validationf("%s, component %q: a reference points nowhere:\n%s", where, n, describeSpecProblems(n, p))
		}
	}
	r.Warnings = append(r.Warnings, warnings...)
	if w := inferredScopes(r.Resources); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	manifest.Sort(r.Resources)
	var valueFields []taint.Field
	var same reuse
	if !trace.whole && !v2 {
		same = reusable(comps, r.Resources, transformers)
	}
	if same == nil {
		run = nil // stand-ins shared out reuse what they do not reach, or nothing is
	}
	var missed atomic.Bool // a stand-in render needed the components cut away
	standIns := newStandIns(set, variantOf(ctx, d, rel, rc, transformers, limit, where, same, run, r.Resources, cut, &missed))
	secretPaths := set.SecretPaths()
	var reaching [][]string
	if trace.on {
		reaching = reachingSecrets(set, r.Resources, standIns)
	}
	if trace.on && len(secretPaths)+len(reaching) > 0 {
		// The second render with sentinels: what differs carries a secret.
		// Several stand-ins only against values from a secret source: one
		// written in the repository is no secret from the module's author.
		variants := 1
		if len(secretPaths) > 0 {
			variants = standInVariants
		}
		valueFields, r.SecretFields, err = traceSecrets(append(secretPaths, reaching...), variants, effective, r.Resources, standIns)
		var te *typeError
		switch {
		case errors.As(err, &te):
			// Kinds are shown everywhere (diffs, refusals, summaries); one a
			// secret reaches would publish it. Neither is named here.
			return nil, quotesNoValue{fault.Validationf("%s: %v; an object's kind and apiVersion must come from the module, never from secrets: use the secret in a field of the object instead", where, te)}
		case err != nil:
			r.Warnings = append(r.Warnings, fmt.Sprintf("secret-derived values could not be traced (%v): every field of every object is treated as secret", err))
		}
		for _, p := range reaching {
			if v, ok := set.At(p); ok {
				r.Secrets = append(r.Secrets, leafText(v))
			}
		}
		r.Secrets = derivedSecrets(r.Secrets, r.Resources, r.SecretFields)
	}
	if missed.Load() {
		return nil, errCut
	}
	if r.Values, r.ValuesText, err = shownValues(d, effective, set, valueFields, len(r.SecretFields) > 0); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if r.ManifestDigest, err = manifest.Digest(r.Resources); err != nil {
		return nil, err
	}
	r.ChangeID = manifest.ChangeID(r.Module.Path, r.Module.Version, r.ValuesText, r.ManifestDigest)
	return r, nil
}

// standInFailure is the error of rendering the release again with every
// secret replaced by its stand-in, or "" when that render succeeds.
func standInFailure(ctx context.Context, d *load.Deployment, key string, rel cue.Value, files []*values.Set, transformers []transformer, platform *opmv2.Platform) string {
	alt := make([]*values.Set, len(files))
	for i, f := range files {
		alt[i] = f.StandIn(taint.Sentinel)
	}
	if _, err := renderRelease(ctx, d, key, rel, alt, transformers, platform, false, tracing{}); err != nil {
		return err.Error()
	}
	return ""
}

// effectiveValues merges module values < release < environment < files and
// validates the result against the module's closed #config. Module values
// are the author's defaults of a module written for OPM's catalog.
func effectiveValues(d *load.Deployment, rel cue.Value, where, key, envName string, files []*values.Set) (cue.Value, *values.Set, error) {
	set := values.Empty()
	if mv := rel.LookupPath(pathModule).LookupPath(cue.ParsePath("values")); mv.Exists() {
		name, _ := rel.LookupPath(pathModule).LookupPath(cue.ParsePath("metadata.name")).String()
		ms, err := values.FromCUE(mv, fmt.Sprintf("module %q values", name))
		if err != nil {
			return cue.Value{}, nil, fault.Wrap(fault.Validation, err)
		}
		set.Merge(ms)
	}
	rs, err := values.FromCUE(rel.LookupPath(cue.ParsePath("values")), fmt.Sprintf("release %q", key))
	if err != nil {
		return cue.Value{}, nil, fault.Wrap(fault.Validation, err)
	}
	set.Merge(rs)
	if envName != "" {
		ev, err := values.FromCUE(rel.LookupPath(cue.MakePath(cue.Def("#environment"), cue.Str("values"))), fmt.Sprintf("environment %q", envName))
		if err != nil {
			return cue.Value{}, nil, fault.Wrap(fault.Validation, err)
		}
		set.Merge(ev)
	}
	for _, f := range files {
		set.Merge(f)
	}
	data, err := set.JSON()
	if err != nil {
		return cue.Value{}, nil, fmt.Errorf("%s: encoding merged values: %w", where, err)
	}
	if opmv2.IsModule(rel.LookupPath(pathModule)) {
		if data, err = inAuthorOrder(data, valueLayers(rel)...); err != nil {
			return cue.Value{}, nil, fmt.Errorf("%s: ordering merged values: %w", where, err)
		}
	}
	merged := d.Context.CompileBytes(data, cue.Filename(load.SyntheticFile))
	effective := rel.LookupPath(pathModule).LookupPath(pathConfig).Unify(merged)
	if err := effective.Validate(cue.Concrete(true), cue.Final()); err != nil {
		msg := set.Redact(describeValues(err, set, rel.LookupPath(pathModule).LookupPath(pathConfig)))
		if strings.Contains(msg, "field is required but not present") {
			// The position is the module's declaration; say where a value goes.
			msg += fmt.Sprintf("\nnext: set each required value in the release (releases.%s: values: …)", cue.Str(key).String())
			if envName != "" {
				msg += fmt.Sprintf(", for this environment alone in environments.%s: values: …", envName)
			}
			msg += ", or in a values file (an environment's valuesFiles, or -f)"
		}
		return cue.Value{}, nil, fault.Wrap(fault.Validation, fmt.Errorf("%s: the merged values (release < environment < values files < -f files) do not satisfy the module's #config:\n%s", where, msg))
	}
	return effective, set, nil
}

// shownValues are the effective values as JSON and as CUE text, the forms
// render prints and the change ID hashes; values from a secret source, and
// the fields a secret reaches (traceSecrets), are shown as
// redact.Mark, so neither form nor the change ID's printed inputs
// hold a secret.
func shownValues(d *load.Deployment, effective cue.Value, set *values.Set, derived []taint.Field, traced bool) (json.RawMessage, string, error) {
	doc, err := effective.MarshalJSON()
	if err != nil {
		return nil, "", fmt.Errorf("encoding values: %w", err)
	}
	syntax := effective.Syntax(cue.Final(), cue.Concrete(true))
	if traced || set.HasSecrets() {
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			return nil, "", fmt.Errorf("masking secret values: %w", err)
		}
		fields := slices.Clone(derived)
		for _, p := range set.SecretPaths() {
			fields = append(fields, taint.Field{Path: p})
		}
		v = taint.Mask(v, fields, func(any) any { return redact.Mark }, secretKey)
		if doc, err = json.Marshal(v); err != nil {
			return nil, "", fmt.Errorf("masking secret values: %w", err)
		}
		syntax = d.Context.CompileBytes(doc).Syntax(cue.Final(), cue.Concrete(true))
	}
	text, err := format.Node(syntax)
	if err != nil {
		return nil, "", fmt.Errorf("formatting values: %w", err)
	}
	return doc, string(text), nil
}

// describeValues names value paths as users write them (values.x.y) and
// says which source set each offending value and where.
func describeValues(err error, set *values.Set, config cue.Value) string {
	return load.DescribeWith(err, func(path []string, _ []token.Pos) (string, []token.Pos) {
		p := valuePath(path)
		if p == "" {
			return "", nil
		}
		// A field #config does not declare: the names it does, nearest first.
		hint := ""
		if labels := strings.Split(p, "."); len(labels) > 0 {
			if s := suggest.DidYouMean(labels[len(labels)-1], fieldNames(lookupSchema(config, labels[:len(labels)-1], cue.Value{}), cue.Value{})); s != "" {
				hint = "; " + s
			}
		}
		if o, ok := set.Origin(valueLabels(path, slices.Index(path, "#config")+1)...); ok {
			return fmt.Sprintf("values.%s (set by %s%s)", p, o.Source, hint), []token.Pos{o.Pos}
		}
		return "values." + p + hint, nil
	})
}

// describeRelease turns the catalog's hidden environment type check into
// the environment's own path and position.
func describeRelease(err error, rel cue.Value, envName string) string {
	return load.DescribeWith(err, func(path []string, _ []token.Pos) (string, []token.Pos) {
		i := slices.Index(path, "_envValuesTypeCheck")
		if i < 0 || envName == "" {
			// A component's schema error: add where the author set it.
			if len(path) > 2 && slices.Contains(path, "#components") {
				return strings.Join(path, "."), []token.Pos{authorPosAt(rel, path[2:])}
			}
			return "", nil
		}
		sub := path[i+1:]
		sels := []cue.Selector{cue.Def("#environment"), cue.Str("values")}
		for _, s := range sub {
			sels = append(sels, cue.Str(s))
		}
		pos := rel.LookupPath(cue.MakePath(sels...)).Pos()
		return fmt.Sprintf("environments.%s.values.%s", envName, strings.Join(sub, ".")), []token.Pos{pos}
	})
}

type releaseMeta struct {
	name, namespace, identity string
	fqn, version              string
	labels, annotations       map[string]string
	module                    Module
}

func readMetadata(rel cue.Value) (releaseMeta, error) {
	var m releaseMeta
	md := rel.LookupPath(cue.ParsePath("metadata"))
	str := func(v cue.Value, p string) (string, error) {
		f := v.LookupPath(cue.ParsePath(p))
		if d, ok := f.Default(); ok {
			f = d
		}
		s, err := f.String()
		if err != nil {
			return "", fmt.Errorf("metadata %s is not set: %s", p, load.Describe(err))
		}
		return s, nil
	}
	var err error
	for _, f := range []struct {
		dst  *string
		v    cue.Value
		path string
	}{
		{&m.name, md, "name"}, {&m.namespace, md, "namespace"}, {&m.identity, md, "identity"},
		{&m.fqn, md, "fqn"}, {&m.version, md, "version"},
	} {
		if *f.dst, err = str(f.v, f.path); err != nil {
			return m, err
		}
	}
	if m.labels, err = stringMap(md.LookupPath(cue.ParsePath("labels"))); err != nil {
		return m, err
	}
	if m.annotations, err = stringMap(md.LookupPath(cue.ParsePath("annotations"))); err != nil {
		return m, err
	}
	mm := rel.LookupPath(pathModule).LookupPath(cue.ParsePath("metadata"))
	// An OPM v2 module names its CUE path in modulePath and its identity
	// in uuid.
	pathField, idField := "apiVersion", "identity"
	if opmv2.IsModule(rel.LookupPath(pathModule)) {
		pathField, idField = "modulePath", "uuid"
	}
	for _, f := range []struct {
		dst  *string
		path string
	}{{&m.module.Path, pathField}, {&m.module.Name, "name"}, {&m.module.Version, "version"}, {&m.module.FQN, "fqn"}, {&m.module.ID, idField}} {
		if *f.dst, err = str(mm, f.path); err != nil {
			return m, fmt.Errorf("module: %w", err)
		}
	}
	return m, nil
}

func stringMap(v cue.Value) (map[string]string, error) {
	out := map[string]string{}
	if !v.Exists() {
		return out, nil
	}
	if err := v.Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding %v: %s", v.Path(), load.Describe(err))
	}
	return out, nil
}

// concrete reports whether v exists and has a concrete (or default) value.
func concrete(v cue.Value) bool {
	if d, ok := v.Default(); ok {
		v = d
	}
	return v.Exists() && v.IsConcrete()
}

// withNamespace rebuilds release key from the catalog's #ModuleRelease with
// its module, values, name, annotations and own labels, and namespace ns.
// A namespace the release sets is concrete and cannot be unified away, so
// the release is rebuilt rather than filled.
func withNamespace(d *load.Deployment, key string, rel cue.Value, ns string) (cue.Value, error) {
	where := fmt.Sprintf("release %q", key)
	md := rel.LookupPath(cue.ParsePath("metadata"))
	nameV := md.LookupPath(cue.ParsePath("name"))
	if dv, ok := nameV.Default(); ok {
		nameV = dv
	}
	name, err := nameV.String()
	if err != nil {
		return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("%s: metadata name is not set: %s", where, load.Describe(err)))
	}
	out := d.Catalog.LookupPath(cue.ParsePath("#ModuleRelease")).
		FillPath(pathModule, rel.LookupPath(pathModule)).
		FillPath(cue.ParsePath("values"), rel.LookupPath(cue.ParsePath("values"))).
		FillPath(cue.ParsePath("metadata.name"), name).
		FillPath(cue.ParsePath("metadata.namespace"), ns)
	if a := md.LookupPath(cue.ParsePath("annotations")); a.Exists() {
		out = out.FillPath(cue.ParsePath("metadata.annotations"), a)
	}
	if ls := md.LookupPath(cue.ParsePath("labels")); ls.Exists() {
		it, err := ls.Fields()
		if err != nil {
			return cue.Value{}, fault.Wrap(fault.Validation, fmt.Errorf("%s: metadata labels: %s", where, load.Describe(err)))
		}
		for it.Next() {
			k := it.Selector().Unquoted()
			// The release's own identity labels are computed again for ns.
			if strings.HasPrefix(k, "module-release.opmodel.dev/") {
				continue
			}
			if v, err := it.Value().String(); err == nil {
				out = out.FillPath(cue.MakePath(cue.Str("metadata"), cue.Str("labels"), cue.Str(k)), v)
			}
		}
	}
	return out, nil
}
