package driftissue_test

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/actions/comment"
	"github.com/opmodel/pipeline/actions/driftissue"
	"github.com/opmodel/pipeline/actions/internal/fakegithub"
)

const token = "ghs_test"

func TestSyncCreatesUpdatesAndCloses(t *testing.T) {
	srv := fakegithub.New(token)
	t.Cleanup(srv.Close)
	client, err := comment.NewClient(srv.Client(), srv.URL, token)
	assert.NilError(t, err)
	target := driftissue.Target{Owner: "acme", Repo: "deploy"}
	marker := driftissue.Marker("deploy")
	assert.Equal(t, marker, "<!-- opm:drift:deploy -->")

	// 150 open issues first, so ours is found on the second page; one of
	// them quotes the marker but is someone else's.
	for i := range 150 {
		body := "unrelated"
		if i == 7 {
			body = "I quote " + marker
		}
		srv.SeedIssue("octocat", "other", body)
	}

	res, err := driftissue.Sync(t.Context(), client, target, marker, driftissue.Report{Drifted: false})
	assert.NilError(t, err)
	assert.Equal(t, res.Action, driftissue.None, "no drift and no issue: nothing to do")

	report := driftissue.Report{Drifted: true, Title: "opm drift: staging", Body: marker + "\nfirst"}
	res, err = driftissue.Sync(t.Context(), client, target, marker, report)
	assert.NilError(t, err)
	assert.Equal(t, res.Action, driftissue.Created)
	number := res.Number
	assert.Equal(t, res.URL, "https://github.example/acme/deploy/issues/251")

	report.Body = marker + "\nsecond"
	res, err = driftissue.Sync(t.Context(), client, target, marker, report)
	assert.NilError(t, err)
	assert.DeepEqual(t, res, driftissue.Result{Action: driftissue.Updated, Number: number, URL: "https://github.example/acme/deploy/issues/251"})
	issues := srv.Issues()
	assert.Equal(t, len(issues), 151, "updated in place, not opened again")
	ours := issues[150]
	assert.Equal(t, ours.Body, marker+"\nsecond")
	assert.Equal(t, ours.Login, comment.BotLogin)
	assert.Equal(t, issues[7].Body, "I quote "+marker, "someone else's issue is never touched")

	listed := 0
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r, "GET /repos/acme/deploy/issues?") {
			listed++
			assert.Assert(t, strings.Contains(r, "state=open"), r)
		}
	}
	assert.Equal(t, listed, 2+2+2, "each Sync reads both pages (100 + 51 issues)")

	res, err = driftissue.Sync(t.Context(), client, target, marker, driftissue.Report{Drifted: false, ClosingComment: "Everything matches again."})
	assert.NilError(t, err)
	assert.Equal(t, res.Action, driftissue.Closed)
	assert.Equal(t, srv.Issues()[150].State, "closed")
	comments := srv.Comments(number)
	assert.Equal(t, len(comments), 1)
	assert.Equal(t, comments[0].Body, "Everything matches again.")

	// Drift again: a closed issue stays closed, a new one is opened.
	res, err = driftissue.Sync(t.Context(), client, target, marker, report)
	assert.NilError(t, err)
	assert.Equal(t, res.Action, driftissue.Created)
	assert.Assert(t, res.Number != number)
}

func TestSyncReadOnlyToken(t *testing.T) {
	srv := fakegithub.New(token)
	t.Cleanup(srv.Close)
	srv.ReadOnly = true
	client, err := comment.NewClient(srv.Client(), srv.URL, token)
	assert.NilError(t, err)
	marker := driftissue.Marker(".")
	_, err = driftissue.Sync(t.Context(), client, driftissue.Target{Owner: "acme", Repo: "deploy"}, marker, driftissue.Report{Drifted: true, Title: "t", Body: marker})
	assert.Assert(t, comment.IsForbidden(err), "%v", err)
}
