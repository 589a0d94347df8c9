// Package driftissue keeps one GitHub issue per repository (and key) that
// says whether the clusters run what the repository declares: a scheduled
// drift check opens it when something drifted, updates it in place on
// every later run that still finds drift, and closes it with a comment
// once everything matches again. The issue is found again by a hidden
// marker in its body and by its author, as the sticky review comment is.
package driftissue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v76/github"

	"github.com/opmodel/pipeline/actions/comment"
)

// Target is the repository the issue lives in.
type Target struct {
	Owner string
	Repo  string
}

// Action says what Sync did.
type Action string

// What Sync can do.
const (
	Created Action = "created"
	Updated Action = "updated"
	Closed  Action = "closed"
	// None: nothing drifted and no issue was open.
	None Action = "none"
)

// Result is the issue Sync left behind.
type Result struct {
	Action Action
	Number int
	URL    string
}

// Marker returns the hidden marker of the drift issue for key (for
// example the deployment directory).
func Marker(key string) string {
	return strings.Replace(comment.Marker(key), "opm:pr-review:", "opm:drift:", 1)
}

// Report is what the issue should say now.
type Report struct {
	// Drifted opens or updates the issue; false closes it.
	Drifted bool
	Title   string
	// Body must contain the marker.
	Body string
	// ClosingComment is posted before the issue is closed.
	ClosingComment string
}

// Sync brings the drift issue of marker in line with rep: created or
// updated when rep.Drifted, closed with rep.ClosingComment otherwise.
// Only open issues written by the token's user (or github-actions[bot])
// count; issues by anyone else are never touched, even when they quote
// the marker.
func Sync(ctx context.Context, client *github.Client, t Target, marker string, rep Report) (Result, error) {
	if marker == "" || (rep.Drifted && !strings.Contains(rep.Body, marker)) {
		return Result{}, errors.New("the drift issue body does not contain its marker")
	}
	found, err := find(ctx, client, t, marker, comment.Authors(ctx, client))
	if err != nil {
		return Result{}, err
	}
	switch {
	case rep.Drifted && found == nil:
		is, _, err := client.Issues.Create(ctx, t.Owner, t.Repo, &github.IssueRequest{Title: github.Ptr(rep.Title), Body: github.Ptr(rep.Body)})
		if err != nil {
			return Result{}, fmt.Errorf("opening the drift issue in %s/%s: %w", t.Owner, t.Repo, err)
		}
		return Result{Action: Created, Number: is.GetNumber(), URL: is.GetHTMLURL()}, nil
	case rep.Drifted:
		is, _, err := client.Issues.Edit(ctx, t.Owner, t.Repo, found.GetNumber(), &github.IssueRequest{Title: github.Ptr(rep.Title), Body: github.Ptr(rep.Body)})
		if err != nil {
			return Result{}, fmt.Errorf("updating drift issue #%d in %s/%s: %w", found.GetNumber(), t.Owner, t.Repo, err)
		}
		return Result{Action: Updated, Number: is.GetNumber(), URL: is.GetHTMLURL()}, nil
	case found == nil:
		return Result{Action: None}, nil
	}
	n := found.GetNumber()
	if rep.ClosingComment != "" {
		if _, _, err := client.Issues.CreateComment(ctx, t.Owner, t.Repo, n, &github.IssueComment{Body: github.Ptr(rep.ClosingComment)}); err != nil {
			return Result{}, fmt.Errorf("commenting on drift issue #%d in %s/%s: %w", n, t.Owner, t.Repo, err)
		}
	}
	is, _, err := client.Issues.Edit(ctx, t.Owner, t.Repo, n, &github.IssueRequest{State: github.Ptr("closed"), StateReason: github.Ptr("completed")})
	if err != nil {
		return Result{}, fmt.Errorf("closing drift issue #%d in %s/%s: %w", n, t.Owner, t.Repo, err)
	}
	return Result{Action: Closed, Number: n, URL: is.GetHTMLURL()}, nil
}

// find returns the oldest open issue (not pull request) with marker by one
// of authors, reading every page.
func find(ctx context.Context, client *github.Client, t Target, marker string, authors map[string]bool) (*github.Issue, error) {
	opts := &github.IssueListByRepoOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := client.Issues.ListByRepo(ctx, t.Owner, t.Repo, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the open issues of %s/%s: %w", t.Owner, t.Repo, err)
		}
		for _, is := range page {
			if !is.IsPullRequest() && strings.Contains(is.GetBody(), marker) && authors[is.GetUser().GetLogin()] {
				return is, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}
