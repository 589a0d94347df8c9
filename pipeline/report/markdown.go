// Package report is how pipeline results read: the Markdown of pull-request
// comments and job summaries, terminal text, status and history tables,
// smoke reports and one-line summaries. The operations in pipeline return
// typed results and never import it; the CLI, the Action and the Dagger
// module print with it, so the same result reads the same everywhere (the
// golden files in pipeline/testdata prove the bytes).
package report

import (
	"cmp"
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/opmodel/pipeline/pipeline"

	"github.com/opmodel/pipeline/engine/manifest"
)

// SummaryMarkdownLimit keeps a job summary under GitHub's 1 MiB per step,
// with room for the runner's own framing.
const SummaryMarkdownLimit = 1<<20 - 4096

// MaxCommentLength is the longest body GitHub accepts for a comment
// (longer ones get 422 "Body is too long").
const MaxCommentLength = 65536

// DefaultMarkdownLimit leaves room under MaxCommentLength for a caller's
// own additions (a marker, a footer).
const DefaultMarkdownLimit = MaxCommentLength - 512

// MarkdownOptions tune Markdown and SmokeMarkdown.
type MarkdownOptions struct {
	// Title starts the heading; default "opm diff" for a Diff's change
	// set, "opm review" otherwise.
	Title string
	// Environments are named in the heading; default those of the
	// releases, in order of appearance.
	Environments []string
	// Marker is written first, verbatim, and counted in Limit: the hidden
	// HTML comment a pull-request comment is found again by.
	Marker string
	// BaseLabel and HeadLabel name the two sides; default "live" and
	// "render" for a Diff's change set, "base" and "head" otherwise.
	BaseLabel string
	HeadLabel string
	// Limit is the maximum length in bytes (never fewer than GitHub's
	// characters); 0 means DefaultMarkdownLimit, negative means none.
	// Over it, diffs are cut largest first, then whole releases, and
	// every code fence and <details> stays closed.
	Limit int
	// SummaryURL, when set, is linked as the place with the full review
	// when something had to be cut.
	SummaryURL string
	// CutHint replaces the sentence that says where the full review is.
	CutHint string
	// Intro is written verbatim after the heading (counted in Limit): a
	// drift report's table of environments.
	Intro string
	// Footer ends the document after a blank line (counted in Limit):
	// which opm wrote it (buildinfo.Info.Footer).
	Footer string
}

// Markdown renders the change set for a pull-request comment, a job
// summary or `opm diff -o markdown`: a heading with the environments, a
// summary line with counts, a table of releases, warnings, then a
// <details> per release with its stale set and a diff per changed object.
// The output depends only on the change set and the options.
func Markdown(cs *pipeline.ChangeSet, opts MarkdownOptions) string {
	if opts.Footer == "" {
		return markdownBody(cs, opts)
	}
	footer := "\n" + strings.TrimRight(opts.Footer, "\n") + "\n"
	switch {
	case opts.Limit == 0:
		opts.Limit = DefaultMarkdownLimit - len(footer)
	case opts.Limit > 0:
		opts.Limit = max(opts.Limit-len(footer), 1)
	}
	return markdownBody(cs, opts) + footer
}

// markdownBody is Markdown without the footer.
func markdownBody(cs *pipeline.ChangeSet, opts MarkdownOptions) string {
	if cs.Operation == "diff" {
		opts.Title = cmp.Or(opts.Title, "opm diff")
		opts.BaseLabel = cmp.Or(opts.BaseLabel, "live")
		opts.HeadLabel = cmp.Or(opts.HeadLabel, "render")
	}
	opts.Title = cmp.Or(opts.Title, "opm review")
	opts.BaseLabel = cmp.Or(opts.BaseLabel, "base")
	opts.HeadLabel = cmp.Or(opts.HeadLabel, "head")
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultMarkdownLimit
	}
	d := newMDDoc(cs, opts)
	full := d.render(-1, nil)
	if limit < 0 || len(full) <= limit {
		return full
	}
	// Cut diffs to at most c bytes each: the largest are cut first and
	// small ones survive whole. Find the largest c that fits.
	if fit := d.render(0, nil); len(fit) <= limit {
		lo, hi := 0, d.maxDiff // render(lo) fits, render(hi) does not
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if len(d.render(mid, nil)) <= limit {
				lo = mid
			} else {
				hi = mid
			}
		}
		return d.render(lo, nil)
	}
	// Even without diffs it is too long: collapse releases, those that
	// save the most first. Sizes are added up rather than re-rendered, so
	// thousands of releases stay cheap; the result is checked at the end.
	n := len(d.releases)
	blocks, stubs := make([]string, n), make([]string, n)
	total, diffs := 0, 0
	for i := range n {
		var cut int
		blocks[i], cut = d.releaseBlockCut(i, 0)
		diffs += cut
		if blocks[i] != "" {
			stubs[i] = d.collapsedStub(i)
		}
		total += len(blocks[i])
	}
	var hdr strings.Builder
	d.writeHeader(&hdr, mdCutStats{diffs: diffs, releases: n})
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	saving := func(i int) int { return len(blocks[i]) - len(stubs[i]) }
	// The least significant releases lose their details first (the most
	// significant diffs stay), the largest first among equals.
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(significance(d.releases[a]), significance(d.releases[b])), cmp.Compare(saving(b), saving(a)))
	})
	collapsed := map[int]bool{}
	for _, i := range order {
		if hdr.Len()+total <= limit || saving(i) <= 0 {
			break
		}
		collapsed[i] = true
		total -= saving(i)
	}
	out := d.render(0, collapsed)
	if len(out) <= limit {
		return out
	}
	// Still too long (thousands of releases or warnings): cut the text and
	// close whatever is open.
	return mdHardCut(out, limit)
}

// mdDoc holds what Markdown renders, so it can be rendered again with
// different cuts.
type mdDoc struct {
	cs       *pipeline.ChangeSet
	opts     MarkdownOptions
	releases []pipeline.ReleaseChanges
	maxDiff  int
}

func newMDDoc(cs *pipeline.ChangeSet, opts MarkdownOptions) *mdDoc {
	d := &mdDoc{cs: cs, opts: opts, releases: cs.Releases}
	for _, r := range cs.Releases {
		for _, o := range r.Objects {
			d.maxDiff = max(d.maxDiff, len(o.Diff))
		}
	}
	return d
}

// mdCutStats counts what a render left out.
type mdCutStats struct {
	diffs, releases int
}

// render writes the document with every diff cut to at most diffCap bytes
// (negative: no cap) and the collapsed releases reduced to one line.
func (d *mdDoc) render(diffCap int, collapsed map[int]bool) string {
	var body strings.Builder
	var cut mdCutStats
	for i := range d.releases {
		if collapsed[i] {
			body.WriteString(d.collapsedStub(i))
			cut.releases++
			continue
		}
		block, n := d.releaseBlockCut(i, diffCap)
		body.WriteString(block)
		cut.diffs += n
	}
	var b strings.Builder
	d.writeHeader(&b, cut)
	b.WriteString(body.String())
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func (d *mdDoc) writeHeader(b *strings.Builder, cut mdCutStats) {
	cs, o := d.cs, d.opts
	if o.Marker != "" {
		b.WriteString(o.Marker)
		b.WriteString("\n")
	}
	envs := o.Environments
	if len(envs) == 0 {
		for _, r := range cs.Releases {
			if r.Environment != "" && !slices.Contains(envs, r.Environment) {
				envs = append(envs, r.Environment)
			}
		}
		for _, u := range cs.Unchanged {
			if u.Environment != "" && !slices.Contains(envs, u.Environment) {
				envs = append(envs, u.Environment)
			}
		}
	}
	b.WriteString("## " + o.Title)
	if len(envs) > 0 {
		b.WriteString(": " + strings.Join(envs, ", "))
	}
	b.WriteString("\n\n")
	if cs.HeadUncommitted {
		b.WriteString("> ⚠️ The head is the working tree, with uncommitted changes: they are part of this review. Commit them (or `git stash`) to review the commit alone.\n\n")
	}
	if o.Intro != "" {
		b.WriteString(strings.TrimRight(o.Intro, "\n") + "\n\n")
	}

	if cut.diffs+cut.releases > 0 {
		var what []string
		if cut.diffs > 0 {
			what = append(what, mdPlural(cut.diffs, "diff", "diffs")+" shortened or left out")
		}
		if cut.releases > 0 {
			what = append(what, mdPlural(cut.releases, "release's details", "releases' details")+" left out")
		}
		hint := o.CutHint
		if hint == "" {
			hint = "The full review is in this run's job summary."
			if o.SummaryURL != "" {
				hint = fmt.Sprintf("The full review is in the [job summary](%s).", o.SummaryURL)
			}
		}
		fmt.Fprintf(b, "> [!WARNING]\n> This review was cut to stay under the length limit: %s. %s\n\n", strings.Join(what, ", "), hint)
	}

	errs := 0
	for _, r := range cs.Releases {
		if r.Error != "" {
			errs++
		}
	}
	rels := mdPlural(len(cs.Releases), "release", "releases")
	c := cs.Counts
	same := ""
	if n := len(cs.Unchanged); n > 0 {
		same = fmt.Sprintf("%s: inputs identical on both sides, not rendered.", mdPlural(n, "release/environment pair unchanged", "release/environment pairs unchanged"))
	}
	switch {
	case len(cs.Releases) == 0 && same != "":
		fmt.Fprintf(b, "**No changes.** %s\n\n", same)
		same = ""
	case len(cs.Releases) == 0:
		b.WriteString("**No changes.** No release is selected.\n\n")
	case !c.Changed() && c.Ghost == 0 && errs == 0:
		fmt.Fprintf(b, "**No changes.** %s, %s unchanged (%s → %s).\n\n", rels, mdPlural(c.Unchanged, "object", "objects"), o.BaseLabel, o.HeadLabel)
	case !c.Changed() && c.Ghost == 0:
		fmt.Fprintf(b, "**No changes** in the releases that could be compared; %s could not be compared (see below).\n\n", mdPlural(errs, "release", "releases"))
	default:
		parts := []string{
			fmt.Sprintf("**%d** to add", c.Added),
			fmt.Sprintf("**%d** to change", c.Modified),
			fmt.Sprintf("**%d** to prune", c.Stale),
			fmt.Sprintf("%d unchanged", c.Unchanged),
		}
		if c.Ghost > 0 {
			parts = append(parts, mdPlural(c.Ghost, "ghost", "ghosts"))
		}
		if errs > 0 {
			parts = append(parts, mdPlural(errs, "error", "errors"))
		}
		fmt.Fprintf(b, "%s in %s (%s → %s).\n\n", strings.Join(parts, " · "), rels, o.BaseLabel, o.HeadLabel)
	}
	if same != "" {
		fmt.Fprintf(b, "%s\n\n", same)
	}

	table := cs.Releases
	if len(cs.Releases) > MaxTableRows {
		// At organisation scale a row per release would fill the comment
		// before the first diff: totals by environment and by kind, then
		// the rows that matter most.
		writeScaleSummary(b, cs)
		table = mostSignificant(cs.Releases, MaxTableRows)
		fmt.Fprintf(b, "The %d most significant of %d releases (errors, then prunes, then the most objects changed); every release is in the full review.\n\n", len(table), len(cs.Releases))
	}
	writeHighlights(b, cs.Releases)
	if len(table) > 0 {
		// What a reviewer compares first comes first; the identities the
		// seeds require close the row.
		fmt.Fprintf(b, "| Release | Environment | Namespace | + | ~ | − | Change ID (%s → %s) | Digest (%s → %s) |\n",
			o.BaseLabel, o.HeadLabel, o.BaseLabel, o.HeadLabel)
		b.WriteString("| --- | --- | --- | ---: | ---: | ---: | --- | --- |\n")
		for _, r := range table {
			if r.Error != "" {
				what := "❌ error"
				if r.Unreachable {
					what = "🔌 unreachable"
				}
				fmt.Fprintf(b, "| %s | %s | %s | | | | %s | |\n", mdCell(r.Name), mdCell(mdFleetLabel(r)), mdCell(r.Namespace), what)
				continue
			}
			var baseRev pipeline.Revision
			if r.Base != nil {
				baseRev = *r.Base
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | %s | %s |\n",
				mdCell(r.Name), mdCell(mdFleetLabel(r)), mdNamespace(r),
				r.Counts.Added, r.Counts.Modified, r.Counts.Stale,
				mdTransition(baseRev.ChangeID, r.Head.ChangeID, r.Base != nil, func(s string) string { return s }),
				mdTransition(baseRev.ManifestDigest, r.Head.ManifestDigest, r.Base != nil, ShortDigest))
		}
		b.WriteString("\n")
	}

	var warns []string
	for _, r := range cs.Releases {
		who := fmt.Sprintf("**%s** (%s)", mdEscape(r.Name), mdEscape(mdEnvLabel(r.Environment)))
		switch {
		case r.Unreachable:
			warns = append(warns, fmt.Sprintf("🔌 %s is unreachable, so it could not be compared: %s", who, mdEscape(mdFirstLine(r.Error))))
		case r.Error != "":
			warns = append(warns, fmt.Sprintf("❌ %s could not be compared: %s", who, mdEscape(mdFirstLine(r.Error))))
		}
		for _, w := range r.Warnings {
			warns = append(warns, fmt.Sprintf("⚠️ %s: %s", who, mdEscape(w)))
		}
		for _, obj := range r.Objects {
			// Diff already warns about each ghost by its ID; say it once.
			id := manifest.ID{Group: obj.Ref.Group, Kind: obj.Ref.Kind, Namespace: obj.Ref.Namespace, Name: obj.Ref.Name}.String()
			if obj.Action == pipeline.Ghost && !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, id) }) {
				warns = append(warns, fmt.Sprintf("👻 %s: ghost %s carries the release's labels but is in neither the inventory nor the render", who, mdCode(mdObjectName(obj.Ref))))
			}
		}
	}
	if len(warns) > 0 {
		b.WriteString("### Warnings\n\n")
		for _, w := range warns {
			b.WriteString("- " + w + "\n")
		}
		b.WriteString("\n")
	}
}

// writeHighlights is "What moves": each release's highlights in words,
// one line per highlight with the releases and environments it moves in.
func writeHighlights(b *strings.Builder, releases []pipeline.ReleaseChanges) {
	var order []string
	// where[h] lists the releases h moves in, each with its environments.
	type rel struct {
		name string
		envs []string
	}
	where := map[string][]*rel{}
	for _, r := range releases {
		for _, h := range r.Highlights {
			if _, ok := where[h]; !ok {
				order = append(order, h)
			}
			i := slices.IndexFunc(where[h], func(x *rel) bool { return x.name == r.Name })
			if i < 0 {
				where[h] = append(where[h], &rel{name: r.Name})
				i = len(where[h]) - 1
			}
			if r.Environment != "" {
				where[h][i].envs = append(where[h][i].envs, r.Environment)
			}
		}
	}
	if len(order) == 0 {
		return
	}
	b.WriteString("**What moves**\n\n")
	for _, h := range order {
		var in []string
		for _, x := range where[h] {
			w := x.name
			if len(x.envs) > 0 {
				w += " in " + strings.Join(x.envs, ", ")
			}
			in = append(in, w)
		}
		fmt.Fprintf(b, "- %s — %s\n", mdEscape(h), mdEscape(strings.Join(in, "; ")))
	}
	b.WriteString("\n")
}

// mdNamespace is the release's namespace, and where else it writes when
// that is more than its namespace (another namespace, cluster-scoped
// objects) or moves.
func mdNamespace(r pipeline.ReleaseChanges) string {
	ns := mdCell(r.Namespace)
	only := func(x *pipeline.Footprint) bool {
		return x == nil || (!x.ClusterScoped && (len(x.Namespaces) == 0 || (len(x.Namespaces) == 1 && x.Namespaces[0] == r.Namespace)))
	}
	if only(r.Reach) && only(r.BaseReach) {
		return ns
	}
	return ns + " (writes to " + mdReach(r) + ")"
}

// mdReach is where a release writes: the namespaces and "cluster", with
// the base's first and ⚠️ when a review moves them.
func mdReach(r pipeline.ReleaseChanges) string {
	cell := func(x *pipeline.Footprint) string {
		parts := make([]string, 0, len(x.Namespaces)+1)
		for _, ns := range x.Namespaces {
			parts = append(parts, mdCode(ns))
		}
		if x.ClusterScoped {
			parts = append(parts, "cluster")
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ", ")
	}
	switch {
	case r.Reach == nil:
		return "-"
	case r.BaseReach != nil && !r.Reach.Equal(r.BaseReach):
		return "⚠️ " + mdCell(cell(r.BaseReach)) + " → " + mdCell(cell(r.Reach))
	}
	return mdCell(cell(r.Reach))
}

// collapsedStub stands for the details of release i when they were cut.
func (d *mdDoc) collapsedStub(i int) string {
	r := d.releases[i]
	return fmt.Sprintf("<details>\n<summary><b>%s</b> · %s · details cut</summary>\n\n_The details of this release were cut to stay under the length limit._\n\n</details>\n\n",
		html.EscapeString(r.Name), html.EscapeString(mdEnvLabel(r.Environment)))
}

// releaseBlockCut is the <details> of release i with diffs capped at
// diffCap bytes ("" when the release has nothing to show) and how many
// diffs the cap shortened.
func (d *mdDoc) releaseBlockCut(i, diffCap int) (string, int) {
	r := d.releases[i]
	hasStale, hasGhost, changed := false, false, false
	for _, o := range r.Objects {
		switch o.Action {
		case pipeline.Stale:
			hasStale = true
		case pipeline.Ghost:
			hasGhost = true
		}
		if o.Action != pipeline.Unchanged {
			changed = true
		}
	}
	if !changed && r.Error == "" {
		return "", 0
	}
	var b strings.Builder
	summary := fmt.Sprintf("<b>%s</b> · %s", html.EscapeString(r.Name), html.EscapeString(mdEnvLabel(r.Environment)))
	if r.Error != "" {
		summary += " · ❌ error"
	} else {
		summary += fmt.Sprintf(" · +%d ~%d −%d", r.Counts.Added, r.Counts.Modified, r.Counts.Stale)
	}
	fmt.Fprintf(&b, "<details>\n<summary>%s</summary>\n\n", summary)
	if r.Error != "" {
		b.WriteString(mdFenced("text", r.Error))
		b.WriteString("\n")
	}
	if hasStale {
		b.WriteString("**Stale:** apply would prune these, in this order.\n\n")
		mdObjectTable(&b, r.Objects, pipeline.Stale)
	}
	if hasGhost {
		b.WriteString("**Ghosts:** on the cluster with this release's labels, in neither the inventory nor the render.\n\n")
		mdObjectTable(&b, r.Objects, pipeline.Ghost)
	}
	cut := 0
	for _, o := range r.Objects {
		if o.Action == pipeline.Unchanged {
			continue
		}
		sym := map[pipeline.Change]string{pipeline.Added: "+", pipeline.Modified: "~", pipeline.Stale: "−", pipeline.Ghost: "👻"}[o.Action]
		fmt.Fprintf(&b, "<details>\n<summary>%s %s <code>%s</code></summary>\n\n", sym, o.Action, html.EscapeString(mdObjectName(o.Ref)))
		text := o.Diff
		if diffCap >= 0 && len(text) > diffCap {
			keep := text[:diffCap]
			keep = keep[:strings.LastIndexByte(keep, '\n')+1]
			cutLines := strings.Count(text[len(keep):], "\n")
			if !strings.HasSuffix(text, "\n") {
				cutLines++
			}
			if keep != "" {
				b.WriteString(mdFenced("diff", keep))
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "_✂️ %s of this diff cut (%s)._\n\n", mdPlural(cutLines, "line", "lines"), mdByteSize(len(text)-len(keep)))
			cut++
		} else if text != "" {
			b.WriteString(mdFenced("diff", text))
			b.WriteString("\n")
		} else {
			b.WriteString("_No diff._\n\n")
		}
		b.WriteString("</details>\n\n")
	}
	b.WriteString("</details>\n\n")
	return b.String(), cut
}

func mdObjectTable(b *strings.Builder, objs []pipeline.ObjectChange, class pipeline.Change) {
	b.WriteString("| Kind | Namespace | Name | Component | Note |\n| --- | --- | --- | --- | --- |\n")
	for _, o := range objs {
		if o.Action != class {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdCell(o.Ref.Kind), mdCell(o.Ref.Namespace), mdCell(o.Ref.Name), mdCell(o.Ref.Component), mdCell(o.Warning))
	}
	b.WriteString("\n")
}

// fenced wraps text in a code fence longer than any backtick run inside
// it, so the text can never close the fence early.
func mdFenced(lang, text string) string {
	run, longest := 0, 0
	for _, c := range text {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return fence + lang + "\n" + text + fence + "\n"
}

// hardCut cuts md to at most limit bytes at a line boundary and closes
// the code fence and <details> elements left open.
func mdHardCut(md string, limit int) string {
	const note = "\n_✂️ The rest of this review was cut to stay under the length limit._\n"
	const reserve = 2048 // room for the closers and the note
	cutAt := max(0, limit-reserve)
	if cutAt < len(md) {
		md = md[:cutAt]
		md = md[:strings.LastIndexByte(md, '\n')+1]
	}
	fence, depth := mdOpenStructures(md)
	var b strings.Builder
	b.WriteString(md)
	if fence != "" {
		b.WriteString(fence + "\n")
	}
	b.WriteString(note)
	for range depth {
		b.WriteString("\n</details>\n")
	}
	out := b.String()
	if len(out) > limit { // a limit smaller than the closers themselves
		return out[:max(0, limit)]
	}
	return out
}

// openStructures scans md and returns the code fence still open ("" if
// none) and how many <details> are open outside code.
func mdOpenStructures(md string) (fence string, depth int) {
	for _, line := range strings.Split(md, "\n") {
		if fence != "" {
			if strings.TrimRight(line, " ") == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			n := len(line) - len(strings.TrimLeft(line, "`"))
			fence = line[:n]
			continue
		}
		depth += strings.Count(line, "<details>") - strings.Count(line, "</details>")
	}
	return fence, max(depth, 0)
}

func mdTransition(from, to string, hasBase bool, short func(string) string) string {
	f, t := "—", "—"
	if hasBase && from != "" {
		f = mdCode(short(from))
	}
	if to != "" {
		t = mdCode(short(to))
	}
	if hasBase && from == to && to != "" {
		return t + " (same)"
	}
	return f + " → " + t
}

// ShortDigest keeps the first 12 hex characters of a digest: "sha256:<hex>"
// shows as the hex, a sealed one (manifest.Sealer) as "hmac:<hex>", so
// nobody takes it for a digest they could recompute.
func ShortDigest(d string) string {
	prefix := ""
	if rest, ok := strings.CutPrefix(d, manifest.SealedDigestPrefix); ok {
		prefix, d = "hmac:", rest
	}
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return prefix + d
}

func mdObjectName(o pipeline.ObjectRef) string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

func mdEnvLabel(env string) string { return cmp.Or(env, "-") }

func mdCode(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

// cell escapes text for a table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\r", "")
	return strings.ReplaceAll(s, "\n", " ")
}

// mdEscape keeps user text (errors, warnings) on one line and from
// opening HTML elements in the comment.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "<", "&lt;")
	s = strings.ReplaceAll(s, ">", "&gt;")
	return strings.ReplaceAll(s, "\n", " ")
}

func mdFirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSuffix(s, ":")
}

// MaxTableRows is how many releases the review table lists before it
// becomes a summary by environment and kind plus the most significant.
const MaxTableRows = 50

// significance orders releases for a reader with little room: errors,
// then prunes, then changed objects.
func significance(r pipeline.ReleaseChanges) int {
	s := r.Counts.Stale*1000 + r.Counts.Added + r.Counts.Modified
	if r.Error != "" {
		s += 1 << 30
	}
	return s
}

// mostSignificant are the n most significant releases, in review order.
func mostSignificant(rs []pipeline.ReleaseChanges, n int) []pipeline.ReleaseChanges {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(significance(rs[b]), significance(rs[a])) })
	idx = idx[:min(n, len(idx))]
	slices.Sort(idx)
	out := make([]pipeline.ReleaseChanges, len(idx))
	for i, k := range idx {
		out[i] = rs[k]
	}
	return out
}

// writeScaleSummary writes the review's totals by environment and by
// kind of object.
func writeScaleSummary(b *strings.Builder, cs *pipeline.ChangeSet) {
	type row struct {
		releases, errs int
		c              pipeline.Counts
	}
	var envs, kinds []string
	byEnv, byKind := map[string]*row{}, map[string]*row{}
	for _, r := range cs.Releases {
		e := mdEnvLabel(r.Environment)
		if byEnv[e] == nil {
			byEnv[e] = &row{}
			envs = append(envs, e)
		}
		byEnv[e].releases++
		if r.Error != "" {
			byEnv[e].errs++
		}
		byEnv[e].c.AddAll(r.Counts)
		for _, o := range r.Objects {
			k := o.Ref.Kind
			if byKind[k] == nil {
				byKind[k] = &row{}
				kinds = append(kinds, k)
			}
			byKind[k].c.Add(o.Action)
		}
	}
	b.WriteString("| Environment | Releases | + | ~ | − | Errors |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, e := range envs {
		r := byEnv[e]
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d |\n", mdCell(e), r.releases, r.c.Added, r.c.Modified, r.c.Stale, r.errs)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		ca, cb := byKind[a].c, byKind[b].c
		return cmp.Or(cmp.Compare(cb.Added+cb.Modified+cb.Stale, ca.Added+ca.Modified+ca.Stale), strings.Compare(a, b))
	})
	b.WriteString("\n| Kind | + | ~ | − |\n| --- | ---: | ---: | ---: |\n")
	for _, k := range kinds {
		c := byKind[k].c
		if c.Added+c.Modified+c.Stale == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d |\n", mdCell(k), c.Added, c.Modified, c.Stale)
	}
	b.WriteString("\n")
}

func mdPlural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func mdByteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReportMarkdownOptions are the options of the full Markdown report: the
// Action's job summary and `opm review -o markdown` / `opm diff -o
// markdown` use them, so the same inputs give the same bytes everywhere.
func ReportMarkdownOptions(footer string) MarkdownOptions {
	return MarkdownOptions{Limit: SummaryMarkdownLimit, Footer: footer,
		CutHint: "Render both refs locally with `opm render` for the full diffs."}
}

// mdFleetLabel is the environment with its group and wave, when it has
// them: "prod-eu (production, wave 2)".
func mdFleetLabel(r pipeline.ReleaseChanges) string {
	l := mdEnvLabel(r.Environment)
	switch {
	case r.Group != "" && r.Wave != 0:
		return fmt.Sprintf("%s (%s, wave %d)", l, r.Group, r.Wave)
	case r.Group != "":
		return fmt.Sprintf("%s (%s)", l, r.Group)
	case r.Wave != 0:
		return fmt.Sprintf("%s (wave %d)", l, r.Wave)
	}
	return l
}
