// Package comment keeps one pull-request comment per key up to date: the
// "sticky" review comment the opm Action writes. The comment is found again
// by a hidden HTML marker in its body and by its author, and updated in
// place, so a pull request gets one comment per workflow, job and
// environments however often it is pushed to.
package comment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v76/github"
)

// BotLogin is the author of comments made with a workflow's GITHUB_TOKEN.
const BotLogin = "github-actions[bot]"

// Target is the pull request (an issue, to the comments API) to comment on.
type Target struct {
	Owner  string
	Repo   string
	Number int
}

// Result says which comment holds the body now.
type Result struct {
	ID      int64
	URL     string
	Created bool
}

// Marker returns the hidden marker for key: an HTML comment GitHub does
// not show. Characters that could end the comment early are replaced.
func Marker(key string) string { return marker("pr-review", key) }

// SmokeMarker is the marker of the smoke-test comment, apart from the
// review's so that each updates only its own.
func SmokeMarker(key string) string { return marker("smoke", key) }

func marker(kind, key string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._/,:+-", r):
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	k := b.String()
	for strings.Contains(k, "--") { // "--" has no place inside an HTML comment
		k = strings.ReplaceAll(k, "--", "-")
	}
	return "<!-- opm:" + kind + ":" + k + " -->"
}

// NewClient returns a go-github client for the REST API at apiURL (the
// GITHUB_API_URL of the run, so GitHub Enterprise Server works: its API
// lives under /api/v3).
func NewClient(httpClient *http.Client, apiURL, token string) (*github.Client, error) {
	base, err := url.Parse(apiURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("GITHUB_API_URL %q is not an absolute URL", apiURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	c := github.NewClient(httpClient).WithAuthToken(token)
	c.BaseURL = base
	return c, nil
}

// Upsert writes body to the comment on t that contains marker and was
// written by the token's user (or by github-actions[bot]), creating it when
// there is none. Comments by anyone else are never touched, even when they
// quote the marker. body must contain marker, or the comment could not be
// found again next time.
func Upsert(ctx context.Context, client *github.Client, t Target, marker, body string) (Result, error) {
	if marker == "" || !strings.Contains(body, marker) {
		return Result{}, errors.New("the comment body does not contain its marker")
	}
	found, err := find(ctx, client, t, marker, Authors(ctx, client))
	if err != nil {
		return Result{}, err
	}
	if found != nil {
		c, _, err := client.Issues.EditComment(ctx, t.Owner, t.Repo, found.GetID(), &github.IssueComment{Body: github.Ptr(body)})
		if err != nil {
			return Result{}, fmt.Errorf("updating comment %d on %s/%s#%d: %w", found.GetID(), t.Owner, t.Repo, t.Number, err)
		}
		return Result{ID: c.GetID(), URL: c.GetHTMLURL()}, nil
	}
	c, _, err := client.Issues.CreateComment(ctx, t.Owner, t.Repo, t.Number, &github.IssueComment{Body: github.Ptr(body)})
	if err != nil {
		return Result{}, fmt.Errorf("commenting on %s/%s#%d: %w", t.Owner, t.Repo, t.Number, err)
	}
	return Result{ID: c.GetID(), URL: c.GetHTMLURL(), Created: true}, nil
}

// Authors are the logins whose comments and issues the token may take as
// its own: github-actions[bot] and the token's user. GitHub Apps and
// GITHUB_TOKEN cannot read /user (403): then only the bot counts, which is
// whom such a token writes as.
func Authors(ctx context.Context, client *github.Client) map[string]bool {
	authors := map[string]bool{BotLogin: true}
	if u, _, err := client.Users.Get(ctx, ""); err == nil && u.GetLogin() != "" {
		authors[u.GetLogin()] = true
	}
	return authors
}

// find returns the oldest comment with marker by one of authors, reading
// every page.
func find(ctx context.Context, client *github.Client, t Target, marker string, authors map[string]bool) (*github.IssueComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := client.Issues.ListComments(ctx, t.Owner, t.Repo, t.Number, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the comments of %s/%s#%d: %w", t.Owner, t.Repo, t.Number, err)
		}
		for _, c := range page {
			if strings.Contains(c.GetBody(), marker) && authors[c.GetUser().GetLogin()] {
				return c, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// IsForbidden reports whether err is the API refusing the token (a
// read-only token on a fork's pull request, or a workflow without
// `permissions: pull-requests: write`).
func IsForbidden(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden
}
