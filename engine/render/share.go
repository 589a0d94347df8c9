package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"

	"github.com/opmodel/pipeline/engine/load"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/opmv2"
	"github.com/opmodel/pipeline/engine/values"
	"github.com/opmodel/pipeline/engine/workers"
)

// A release's components are transformed on every core. Each goroutine
// (the caller's one of them) builds, in a CUE context of its own, the
// catalog and the module's package with its #components cut down to its
// share and the release's merged values written into #config as data —
// the module is evaluated once, with its values, and only for the share —
// then transforms the share and reads its specs for the reference checks;
// the shares' objects are put back in component order. The caller's own context
// never evaluates the module with the values (filling them in evaluated
// every component, a tenth of a render, before anything could be shared),
// unless a broken reference must say where it is written; and when the
// release is a command's one render, its load leaves the components out
// altogether (moduleCut, in cut.go). The stand-in
// renders that trace secrets share the components out the same way, each
// share reusing what its own real build says the stand-ins do not reach.
// No CUE value crosses goroutines (a context's values are not safe for
// concurrent evaluation: docs/performance.md), only the values' JSON, the
// parsed files (read, never changed) and the objects transformed.
//
// A module whose shape makes cutting it unsafe is not shared (cuttable:
// components that refer to each other or to #components, #components that
// is not a literal struct in the module's own files), nor a release whose
// #module the root package could add to (modulePackage), nor one rendered
// with transformers of the deployment's own, nor an OPM v2 release. The
// components are named as the deployment's build evaluated them, at their
// default values; a share whose build with the release's values names
// others fails. Whatever goes wrong on a share — an error, an object two
// shares both render, other names — renders the release again on the
// caller's goroutine alone, so every message is a render's without
// sharing, and a share's own error (which could quote a secret value it
// was given) is never shown.

// componentsPerWorker is the fewest components a goroutine is given:
// below it, building the catalog and the module costs more than the
// transforms it takes off the caller (docs/performance.md).
const componentsPerWorker = 24

// sharing is how a release's components are shared out; the zero value
// transforms them all on the caller's goroutine.
type sharing struct {
	// workers is how many goroutines transform, the caller's included.
	workers int
	// least is the fewest components per goroutine (componentsPerWorker
	// unless a test says otherwise).
	least int
	// catalogProvider: the release renders with the embedded catalog's
	// provider, which every goroutine reads from its own catalog (a
	// deployment's own providers are in the package a goroutine does
	// not build).
	catalogProvider bool
	// names are the components as the module's syntax names them, when
	// the caller's evaluation has them cut away (moduleCut); nil when
	// they are read from it.
	names []string
}

// goroutines is how many goroutines n components are shared out to.
func (s sharing) goroutines(n int) int {
	if s.workers < 2 || s.least < 1 {
		return 1
	}
	return workers.Count(n/s.least, s.workers)
}

// plan is how release key's components are shared out, or nil when they
// are not (too few for two goroutines, or a module that cannot be cut:
// see above). rel is the release as the caller evaluated it, whose
// module's components at their default values (evaluated when the
// deployment was built) name the components; a goroutine that finds
// other names with the release's values fails its share, and the release
// renders on the caller alone.
func (s sharing) plan(d *load.Deployment, key string, set *values.Set, rel cue.Value, rc releaseContext) *shared {
	module := rel.LookupPath(pathModule)
	if !s.catalogProvider || opmv2.IsModule(module) {
		return nil
	}
	names := s.names
	if names == nil {
		var err error
		if names, err = load.FieldNames(module.LookupPath(pathComponents)); err != nil {
			return nil
		}
	}
	n := s.goroutines(len(names))
	if n < 2 {
		return nil
	}
	job, ok := newShareJob(d, key, set, rc, names)
	if !ok {
		return nil
	}
	shares := deal(names, n)
	syntactic := s.names != nil // the cut load named them from the syntax
	if !syntactic {
		syn, ok := componentNames(job.module.Files)
		syntactic = ok && slices.Equal(syn, names)
	}
	return &shared{job: job, names: names, syntactic: syntactic, least: s.least, shares: shares, built: make([]*built, len(shares))}
}

// shared is how a release's components are shared out: the real render
// (render) and its stand-in renders (variant) give each goroutine the
// same share.
type shared struct {
	job   shareJob
	names []string
	// syntactic: the module's syntax names exactly these components
	// (componentNames: literal structs of plainly labelled fields), the
	// one shape the component cache keys from; cc is that cache, set by
	// render for its stand-in renders (nil: none).
	syntactic bool
	cc        *componentCache
	// least is the fewest components a goroutine builds (sharing's).
	least  int
	shares [][]string
	// built are the goroutines' builds for the real render, by share:
	// what a stand-in render of the share is compared with. Each is used
	// by one goroutine at a time.
	built []*built
}

// render transforms every share on a goroutine of its own, the first on
// the caller's, each building the module cut to its share with the
// merged values (only the components the component cache misses, where
// it can be used: lookup, renderCached); it returns the objects in
// component order and each component's spec as the reference checks read
// it. want are the caller's transformers.
func (s *shared) render(ctx context.Context, d *load.Deployment, want []transformer, limit *Reach, where string) ([]manifest.Resource, map[string]componentSpec, error) {
	var cc *componentCache
	if s.syntactic {
		cc = newComponentCache(s.job.rc.transforms, s.job, s.names, want)
	}
	s.cc = cc
	var found map[string]cachedComponent
	if cc != nil {
		var err error
		if found, err = s.lookup(ctx, cc); err != nil {
			return nil, nil, err
		}
	}
	specs := make([]map[string]componentSpec, len(s.shares))
	out, err := s.each(ctx, func(i int) ([]manifest.Resource, error) {
		if cc == nil {
			b, err := s.buildShare(ctx, d, i, s.shares[i], want)
			if err != nil {
				return nil, err
			}
			objs, err := renderComponentsChecked(b.cctx, b.comps, b.rc, b.transformers, b.catalog, limit, where, true, nil, s.shares[i])
			if err != nil {
				return nil, err
			}
			specs[i] = specsOf(b.comps, s.shares[i])
			return objs, nil
		}
		objs, sp, err := s.renderCached(ctx, d, i, cc, found, want, limit, where)
		specs[i] = sp
		return objs, err
	})
	if err != nil {
		return nil, nil, err
	}
	inComponentOrder(out, s.names)
	all := map[string]componentSpec{}
	for _, m := range specs {
		maps.Copy(all, m)
	}
	return out, all, nil
}

// cachedComponent is what the component cache said of a component: its
// key, and its entry when it has one.
type cachedComponent struct {
	key   string
	entry componentEntry
	hit   bool
}

// lookup looks every component up in the component cache (each share on
// a goroutine: entries are opened and decoded), then shares the
// components out again so that the ones to build — the misses, or all
// with verify — are spread over the goroutines: the values that moved
// for a tenth of the components may have moved them all in one share,
// which one goroutine would then build while the others wait. No more
// goroutines build than the misses fill (least each); the hits, which
// cost a decode, are spread over all of them. Objects are sorted after
// the render, so which share renders a component changes nothing.
func (s *shared) lookup(ctx context.Context, cc *componentCache) (map[string]cachedComponent, error) {
	looked := make([]map[string]cachedComponent, len(s.shares))
	if _, err := s.each(ctx, func(i int) ([]manifest.Resource, error) {
		m := make(map[string]cachedComponent, len(s.shares[i]))
		for _, n := range s.shares[i] {
			c := cachedComponent{key: cc.key(n, cc.values, cc.whole, true)}
			c.entry, c.hit = cc.getKey(c.key)
			m[n] = c
		}
		looked[i] = m
		return nil, nil
	}); err != nil {
		return nil, err
	}
	found := make(map[string]cachedComponent, len(s.names))
	for _, m := range looked {
		maps.Copy(found, m)
	}
	var build, hits []string
	for _, n := range s.names {
		if found[n].hit && !cc.verify {
			hits = append(hits, n)
		} else {
			build = append(build, n)
		}
	}
	builders := max(1, min(len(s.shares), len(build)/max(1, s.least)))
	byBuild, byHit := deal(build, builders), deal(hits, len(s.shares))
	for i := range s.shares {
		var share []string
		if i < len(byBuild) {
			share = append(share, byBuild[i]...)
		}
		if i < len(byHit) {
			share = append(share, byHit[i]...)
		}
		s.shares[i] = share
	}
	return found, nil
}

// buildShare builds the components share of share i with the release's
// values and keeps the build for the share's stand-in renders.
func (s *shared) buildShare(ctx context.Context, d *load.Deployment, i int, share []string, want []transformer) (*built, error) {
	var in *built
	if i == 0 {
		// The first share is the caller's goroutine, whose context has
		// the catalog built already.
		in = &built{cctx: d.Context, catalog: d.Catalog, transformers: want, rc: s.job.rc}
		if s.job.env != nil {
			in.rc.env = d.Context.CompileBytes(s.job.env)
		}
	}
	b, err := s.job.build(ctx, d, in, share, s.job.values, want)
	if err != nil {
		return nil, err
	}
	if err := b.sameNames(s.names, share); err != nil {
		return nil, err
	}
	s.built[i] = b
	s.job.rc.transforms.stats.builtComponents(len(share))
	return b, nil
}

// renderCached renders share i from what the component cache holds
// (found, by lookup): only the components it misses are built (all of
// them, when hits are verified), and what they render is stored. Every
// spec is read back from its entry's JSON, so a hit and the render that
// stored it check references alike.
func (s *shared) renderCached(ctx context.Context, d *load.Deployment, i int, cc *componentCache, found map[string]cachedComponent, want []transformer, limit *Reach, where string) ([]manifest.Resource, map[string]componentSpec, error) {
	share := s.shares[i]
	entries := make(map[string]componentEntry, len(share))
	var missed []string
	for _, n := range share {
		c := found[n]
		if c.hit {
			entries[n] = c.entry
		}
		if !c.hit || cc.verify {
			missed = append(missed, n)
		}
	}
	fresh := map[string][]manifest.Resource{}
	if len(missed) > 0 {
		b, err := s.buildShare(ctx, d, i, missed, want)
		if err != nil {
			return nil, nil, err
		}
		objs, err := renderComponentsChecked(b.cctx, b.comps, b.rc, b.transformers, b.catalog, limit, where, true, nil, missed)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			fresh[o.Component] = append(fresh[o.Component], o)
		}
		specs := specsOf(b.comps, missed)
		for _, n := range missed {
			e, err := entryOf(fresh[n], specs[n])
			if err != nil {
				return nil, nil, err
			}
			hit, ok := entries[n]
			switch {
			case ok && !hit.same(e):
				return nil, nil, fmt.Errorf("%s, component %q: %w (verified because OPM_VERIFY_SKIPS is set): this is a bug in opm; OPM_CACHE_DIR=off renders without the cache", where, n, errCacheDiffers)
			case !ok:
				cc.put(found[n].key, e)
			}
			entries[n] = e
		}
	}
	var out []manifest.Resource
	specs := make(map[string]componentSpec, len(share))
	for _, n := range share {
		e := entries[n]
		var spec componentSpec
		if err := json.Unmarshal(e.Spec, &spec); err != nil {
			return nil, nil, err
		}
		specs[n] = spec
		if objs, ok := fresh[n]; ok || slices.Contains(missed, n) {
			out = append(out, objs...)
			continue
		}
		objs, err := e.resources(n)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			// Checked when it was rendered, but against the reach the
			// environment has now.
			if why := limit.Check(o, s.job.rc.release.namespace); why != "" {
				return nil, nil, fmt.Errorf("%s, component %q: %s", where, n, why)
			}
		}
		out = append(out, objs...)
	}
	return out, specs, nil
}

// each runs fn for every share, the first on the caller's goroutine, and
// returns their objects in share order, or an error when one failed or
// two shares render one object.
func (s *shared) each(ctx context.Context, fn func(i int) ([]manifest.Resource, error)) ([]manifest.Resource, error) {
	out := make([][]manifest.Resource, len(s.shares))
	errs := make([]error, len(s.shares))
	var g workers.Group
	for i := 1; i < len(s.shares); i++ {
		g.Go(func() {
			if errs[i] = ctx.Err(); errs[i] == nil {
				out[i], errs[i] = fn(i)
			}
		})
	}
	out[0], errs[0] = fn(0)
	g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []manifest.Resource
	seen := map[manifest.ID]bool{}
	for _, objs := range out {
		for _, o := range objs {
			if seen[o.ID()] {
				return nil, fmt.Errorf("%s is rendered by two components", o.ID())
			}
			seen[o.ID()] = true
		}
		all = append(all, objs...)
	}
	return all, nil
}

// variant renders the components of a stand-in render (variantOf) shared
// out as the real render's were: each share on a goroutine that builds
// the module again with the stand-in values data — only the components
// whose syntax may read a field of #config the stand-ins moved (moved,
// when known; the others are the real render's objects, as their values
// are the real ones) — and reuses what the share's real build says the
// stand-ins do not reach. resources are the real render's objects.
func (s *shared) variant(ctx context.Context, d *load.Deployment, data []byte, moved []string, known bool, want []transformer, limit *Reach, where string, resources []manifest.Resource) ([]manifest.Resource, error) {
	s.job.rc.transforms.stats.count(standInCount)
	var standIn map[string]json.RawMessage // the stand-in values, for the component cache
	if s.cc != nil && json.Unmarshal(data, &standIn) != nil {
		standIn = nil
	}
	byComponent := map[string][]manifest.Resource{}
	for _, r := range resources {
		byComponent[r.Component] = append(byComponent[r.Component], r)
	}
	all, err := s.each(ctx, func(i int) ([]manifest.Resource, error) {
		// The share's real build, when it built any component (the
		// component cache may have spared it): what it did not build is
		// rendered with the stand-ins.
		var realSame reuse
		if real := s.built[i]; real != nil {
			if real.same == nil {
				real.same = reusable(func() (cue.Value, error) { return real.comps, nil }, resources, real.transformers)
			}
			realSame = real.same
		}
		reached := s.shares[i]
		if known {
			reached = slices.DeleteFunc(slices.Clone(reached), func(n string) bool {
				r, ok := s.job.reads[n]
				return ok && !r.reads(moved)
			})
		}
		// What the component cache holds of the stand-in render (the
		// stand-ins are a function of the values they replace — of their
		// shape only, for values the repository wrote: the same give the
		// same entries) is taken from it; with verify, rendered anyway
		// and compared.
		hits, keys, missed := map[string][]manifest.Resource{}, map[string]string{}, reached
		if s.cc != nil && standIn != nil {
			missed = nil
			for _, n := range reached {
				key := s.cc.key(n, standIn, data, false)
				keys[n] = key
				if e, ok := s.cc.getKey(key); ok {
					if objs, err := e.resources(n); err == nil {
						hits[n] = objs
						if !s.cc.verify {
							continue
						}
					}
				}
				missed = append(missed, n)
			}
		}
		if len(missed) == 0 {
			var out []manifest.Resource
			for _, n := range s.shares[i] {
				if objs, ok := hits[n]; ok {
					out = append(out, objs...)
				} else {
					out = append(out, byComponent[n]...)
				}
			}
			return out, nil
		}
		b, err := s.job.build(ctx, d, s.built[i], missed, data, want)
		if err != nil {
			return nil, err
		}
		if st := s.job.rc.transforms.stats; st != nil {
			st.standInsBuilt.Add(int64(len(missed)))
		}
		if err := b.sameNames(s.names, missed); err != nil {
			return nil, err
		}
		b.rc.transforms.stats = nil
		same := func(name string, cv cue.Value) ([]manifest.Resource, bool) {
			if !slices.Contains(reached, name) {
				return byComponent[name], true
			}
			if objs, ok := hits[name]; ok && !slices.Contains(missed, name) {
				return objs, true
			}
			if realSame == nil {
				return nil, false
			}
			return realSame(name, cv)
		}
		objs, err := renderComponentsChecked(b.cctx, b.comps, b.rc, b.transformers, b.catalog, limit, where, false, same, s.shares[i])
		if err != nil || s.cc == nil || standIn == nil {
			return objs, err
		}
		rendered := map[string][]manifest.Resource{}
		for _, o := range objs {
			rendered[o.Component] = append(rendered[o.Component], o)
		}
		specs := specsOf(b.comps, missed)
		for _, n := range missed {
			e, err := entryOf(rendered[n], specs[n])
			if err != nil {
				return nil, err
			}
			if hit, ok := hits[n]; ok {
				h, err := entryOf(hit, specs[n])
				if err != nil || !h.sameObjects(e) {
					return nil, fmt.Errorf("%s, component %q, a stand-in render: %w (verified because OPM_VERIFY_SKIPS is set): this is a bug in opm; OPM_CACHE_DIR=off renders without the cache", where, n, errCacheDiffers)
				}
				continue
			}
			s.cc.put(keys[n], e)
		}
		return objs, nil
	})
	if err != nil {
		return nil, err
	}
	inComponentOrder(all, s.names)
	return all, nil
}

// shareJob is what every goroutine but the caller's builds its share
// from: plain data and parsed files, nothing of the caller's context.
type shareJob struct {
	module *build.Instance
	// reads are what each component's syntax reads of #config.
	reads map[string]configRead
	// values is the merged values' JSON, env the environment's metadata
	// as JSON (nil without one).
	values, env []byte
	rc          releaseContext
}

// newShareJob is the job of sharing out the components names of release
// key; ok is false when they cannot be (see above).
func newShareJob(d *load.Deployment, key string, set *values.Set, rc releaseContext, names []string) (shareJob, bool) {
	module, ok := modulePackage(d.RootPackage(), key)
	if !ok || !cuttable(module.Files, names) {
		return shareJob{}, false
	}
	job := shareJob{module: module, rc: rc, reads: configReads(module.Files)}
	var err error
	if job.values, err = set.JSON(); err != nil {
		return shareJob{}, false
	}
	if rc.env.Exists() {
		if job.env, err = rc.env.MarshalJSON(); err != nil {
			return shareJob{}, false
		}
	}
	// Nothing of the caller's context: a goroutine sets what it needs.
	job.rc.env, job.rc.values, job.rc.moduleInstance, job.rc.platform, job.rc.warnings = cue.Value{}, cue.Value{}, cue.Value{}, nil, nil
	return job, true
}

// built is one goroutine's build of the module cut to its share, in a CUE
// context of its own, with what it transforms with.
type built struct {
	cctx         *cue.Context
	comps        cue.Value
	catalog      cue.Value
	transformers []transformer
	rc           releaseContext
	same         reuse // for the share's stand-in renders, made on first use
}

// build builds the module with only the components share and the values
// data (their JSON) in a CUE context of its own — or in the context of in,
// an earlier build on the same share (nil: none), sharing its catalog and
// transformers; want are the caller's transformers, which the catalog
// built again must give.
func (j shareJob) build(ctx context.Context, d *load.Deployment, in *built, share []string, data []byte, want []transformer) (*built, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b load.Built
	var err error
	if in != nil {
		b, err = d.BuildPackageIn(load.Built{Context: in.cctx, Catalog: in.catalog}, j.module, cutter(j.module.PkgName, share, data))
	} else {
		b, err = d.BuildPackage(j.module, cutter(j.module.PkgName, share, data))
	}
	if err != nil {
		return nil, err
	}
	comps := b.Package.LookupPath(pathComponents)
	if err := comps.Err(); err != nil {
		return nil, err
	}
	if in != nil {
		return &built{cctx: in.cctx, comps: comps, catalog: in.catalog, transformers: in.transformers, rc: in.rc}, nil
	}
	ts, err := loadTransformers([]provider{{name: "kubernetes", value: b.Catalog.LookupPath(pathProvider)}})
	if err != nil {
		return nil, err
	}
	if !slices.EqualFunc(ts, want, func(a, b transformer) bool { return a.fqn == b.fqn && a.provider == b.provider }) {
		return nil, errors.New("the catalog's transformers read again differ")
	}
	out := &built{cctx: b.Context, comps: comps, catalog: b.Catalog, transformers: ts, rc: j.rc}
	if j.env != nil {
		out.rc.env = b.Context.CompileBytes(j.env)
	}
	return out, nil
}

// sameNames checks that the build has every component of its share and
// no component the caller's names lack (one the values add, which the
// names, read at the default values, would miss).
func (b *built) sameNames(names, share []string) error {
	got, err := load.FieldNames(b.comps)
	if err != nil {
		return err
	}
	for _, n := range got {
		if !slices.Contains(names, n) {
			return fmt.Errorf("component %q is not among the release's components at their default values", n)
		}
	}
	for _, n := range share {
		if !slices.Contains(got, n) {
			return fmt.Errorf("component %q is not among the release's components with its values", n)
		}
	}
	return nil
}

// deal shares names out to n goroutines as cards are dealt, name i to
// share i mod n (fewer shares when there are fewer names): components
// next to each other tend to read the same values, so a change to one
// value is built by every goroutine rather than by the one whose run of
// components reads it.
func deal(names []string, n int) [][]string {
	n = max(1, min(n, len(names)))
	out := make([][]string, n)
	for i, name := range names {
		out[i%n] = append(out[i%n], name)
	}
	return out
}

// inComponentOrder sorts the objects of the shares into the order of the
// components that rendered them (names), each component's in the order
// it rendered them, as one goroutine rendering them all gives.
func inComponentOrder(objs []manifest.Resource, names []string) {
	at := make(map[string]int, len(names))
	for i, n := range names {
		at[n] = i
	}
	slices.SortStableFunc(objs, func(a, b manifest.Resource) int { return at[a.Component] - at[b.Component] })
}
