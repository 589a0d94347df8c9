package report

import (
	"fmt"
	"strings"

	"github.com/opmodel/pipeline/pipeline"
)

// ReviewPlanText is `opm review plan`: the pairs, the renders and their
// estimated cost, then each shard of the split, if there is one.
func ReviewPlanText(p *pipeline.ReviewPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d release/environment pairs to review (%d unchanged), %d renders of which %d are cached, about %.1fs of rendering\n",
		p.Pairs, p.Unchanged, p.Renders, p.Cached, p.Seconds)
	if p.Split != nil {
		count := p.Split.Pairs()
		for i, s := range p.Split.Seconds {
			fmt.Fprintf(&b, "shard %d/%d: %d pairs, about %.1fs\n", i+1, p.Split.Shards, count[i], s)
		}
	}
	return b.String()
}

// ReviewPlanMarkdown is the review plan in the Action's plan-mode job
// summary: the same figures, and a table of the shards when there are
// several.
func ReviewPlanMarkdown(p *pipeline.ReviewPlan) string {
	shards := 1
	if p.Split != nil {
		shards = p.Split.Shards
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Review plan\n\n%d release/environment pairs to review (%d unchanged), %d renders of which %d are cached, about %.0fs of rendering: **%d shard(s)**.\n",
		p.Pairs, p.Unchanged, p.Renders, p.Cached, p.Seconds, shards)
	if shards > 1 {
		b.WriteString("\n| Shard | Pairs | Estimated |\n| --- | ---: | ---: |\n")
		count := p.Split.Pairs()
		for i, s := range p.Split.Seconds {
			fmt.Fprintf(&b, "| %d/%d | %d | %.0fs |\n", i+1, shards, count[i], s)
		}
	}
	return b.String()
}

// RenderCacheLine says how many of a review's renders the render cache
// answered, as Bazel and Turborepo report their cache hits (so a CI
// cache that was not restored shows); "" when the review needed none.
func RenderCacheLine(cs *pipeline.ChangeSet) string {
	renders, cached := cs.RenderCounts()
	if renders == 0 {
		return ""
	}
	return fmt.Sprintf("render cache: %d of %d renders read from the cache, %d rendered", cached, renders, renders-cached)
}
