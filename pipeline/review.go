package pipeline

import (
	"context"

	"github.com/opmodel/pipeline/pipeline/review"
)

// A review of two commits without a cluster (pipeline/review), under the
// names the front doors use.
type (
	// ReviewOptions are the options of Review, ReviewShard and PlanReview.
	ReviewOptions = review.Options
	// Shard is one part of a review split across runners (I/N).
	Shard = review.Shard
	// PartialReview is one shard's review, for MergeReviews.
	PartialReview = review.Partial
	// ReviewPlan is what a review would render, known before rendering.
	ReviewPlan = review.Plan
	// ReviewSplit assigns a planned review's pairs to shards.
	ReviewSplit = review.Split
)

// The formats of a review's files, and the cost assumed for a render
// nothing is known about.
const (
	PartialFormat     = review.PartialFormat
	SplitFormat       = review.SplitFormat
	DefaultRenderCost = review.DefaultRenderCost
)

// Review compares two versions of a deployment directory without a
// cluster: see review.Run.
func Review(ctx context.Context, opts ReviewOptions) (*ChangeSet, error) {
	return review.Run(ctx, opts)
}

// ReviewShard reviews opts.Shard's part of a review from git: see
// review.RunShard.
func ReviewShard(ctx context.Context, opts ReviewOptions) (*PartialReview, error) {
	return review.RunShard(ctx, opts)
}

// PlanReview plans a review without rendering: see review.PlanOf.
func PlanReview(ctx context.Context, opts ReviewOptions) (*ReviewPlan, error) {
	return review.PlanOf(ctx, opts)
}

// MergeReviews combines every shard's partial into the review: see
// review.Merge.
func MergeReviews(parts []*PartialReview) (*ChangeSet, error) { return review.Merge(parts) }

// MergeReviewFiles reads partial reviews from files and merges them: see
// review.MergeFiles.
func MergeReviewFiles(names ...string) (*ChangeSet, error) { return review.MergeFiles(names...) }

// ParseShard reads "I/N": see review.ParseShard.
func ParseShard(s string) (*Shard, error) { return review.ParseShard(s) }

// ReadSplit reads a planned split from a file: see review.ReadSplit.
func ReadSplit(name string) (*ReviewSplit, error) { return review.ReadSplit(name) }

// BaseRef is what a base named by a user or a workflow resolves from:
// see review.BaseRef.
func BaseRef(ref string) []string { return review.BaseRef(ref) }
