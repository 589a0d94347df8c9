package comment

import (
	"fmt"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/actions/internal/fakegithub"
)

var target = Target{Owner: "acme", Repo: "deploy", Number: 7}

func TestMarker(t *testing.T) {
	assert.Equal(t, Marker("review/opm/staging,production"), "<!-- opm:pr-review:review/opm/staging,production -->")
	assert.Equal(t, Marker("pr-review/deploy-job/all"), "<!-- opm:pr-review:pr-review/deploy-job/all -->")
	m := Marker("evil --> <b>x</b> ---")
	assert.Assert(t, !strings.Contains(strings.TrimSuffix(m, " -->"), "-->"), m)
	assert.Assert(t, !strings.Contains(m, "<b>"), m)
}

func TestUpsertCreatesThenUpdates(t *testing.T) {
	srv := fakegithub.New("tok")
	defer srv.Close()
	client, err := NewClient(nil, srv.URL, "tok")
	assert.NilError(t, err)
	marker := Marker("wf/job/staging")

	// 150 other comments first: the marker's comment is on page 2.
	for i := range 150 {
		srv.Seed(target.Number, "someone", fmt.Sprintf("comment %d", i))
	}
	first, err := Upsert(t.Context(), client, target, marker, marker+"\nfirst")
	assert.NilError(t, err)
	assert.Assert(t, first.Created)
	assert.Assert(t, is.Contains(first.URL, fmt.Sprintf("#issuecomment-%d", first.ID)))

	second, err := Upsert(t.Context(), client, target, marker, marker+"\nsecond")
	assert.NilError(t, err)
	assert.Assert(t, !second.Created)
	assert.Equal(t, second.ID, first.ID, "the same comment is updated")

	var mine []fakegithub.Comment
	for _, c := range srv.Comments(target.Number) {
		if strings.Contains(c.Body, marker) {
			mine = append(mine, c)
		}
	}
	assert.Equal(t, len(mine), 1)
	assert.Equal(t, mine[0].Body, marker+"\nsecond")
	assert.Equal(t, mine[0].Login, BotLogin)

	// Pagination: 100 per page, and page 2 was read.
	reqs := strings.Join(srv.Requests(), "\n")
	assert.Assert(t, is.Contains(reqs, "per_page=100"))
	assert.Assert(t, is.Contains(reqs, "page=2"))
	assert.Assert(t, is.Contains(reqs, fmt.Sprintf("PATCH /repos/acme/deploy/issues/comments/%d", first.ID)))
}

func TestUpsertLeavesOtherAuthorsAlone(t *testing.T) {
	srv := fakegithub.New("tok")
	defer srv.Close()
	client, err := NewClient(nil, srv.URL, "tok")
	assert.NilError(t, err)
	marker := Marker("wf/job/all")
	// Someone quoted our comment, marker and all.
	quoted := srv.Seed(target.Number, "mallory", "> "+marker+"\n> the old review")
	// A comment with a marker for other environments.
	other := srv.Seed(target.Number, BotLogin, Marker("wf/job/staging")+"\nother")

	res, err := Upsert(t.Context(), client, target, marker, marker+"\nreview")
	assert.NilError(t, err)
	assert.Assert(t, res.Created)
	for _, c := range srv.Comments(target.Number) {
		switch c.ID {
		case quoted:
			assert.Equal(t, c.Body, "> "+marker+"\n> the old review")
		case other:
			assert.Equal(t, c.Body, Marker("wf/job/staging")+"\nother")
		}
	}
}

func TestUpsertAsTokenUser(t *testing.T) {
	srv := fakegithub.New("pat")
	srv.Login = "deploy-bot"
	defer srv.Close()
	// GitHub Enterprise Server: the API is under /api/v3.
	client, err := NewClient(nil, srv.URL+"/api/v3", "pat")
	assert.NilError(t, err)
	marker := Marker("k")
	id := srv.Seed(target.Number, "deploy-bot", marker+"\nold")
	res, err := Upsert(t.Context(), client, target, marker, marker+"\nnew")
	assert.NilError(t, err)
	assert.Equal(t, res.ID, id)
	for _, r := range srv.Requests() {
		assert.Assert(t, strings.HasPrefix(strings.SplitN(r, " ", 2)[1], "/api/v3/"), r)
	}
}

func TestUpsertErrors(t *testing.T) {
	srv := fakegithub.New("tok")
	defer srv.Close()
	client, err := NewClient(nil, srv.URL, "tok")
	assert.NilError(t, err)

	_, err = Upsert(t.Context(), client, target, Marker("k"), "no marker")
	assert.ErrorContains(t, err, "marker")

	srv.ReadOnly = true
	_, err = Upsert(t.Context(), client, target, Marker("k"), Marker("k")+"\nbody")
	assert.Assert(t, IsForbidden(err), "%v", err)
	srv.ReadOnly = false

	_, err = Upsert(t.Context(), client, target, Marker("k"), Marker("k")+strings.Repeat("x", fakegithub.MaxBody))
	assert.ErrorContains(t, err, "too long")
	assert.Assert(t, !IsForbidden(err))

	bad, err := NewClient(nil, srv.URL, "wrong")
	assert.NilError(t, err)
	_, err = Upsert(t.Context(), bad, target, Marker("k"), Marker("k"))
	assert.ErrorContains(t, err, "401")

	_, err = NewClient(nil, "not a url", "tok")
	assert.ErrorContains(t, err, "GITHUB_API_URL")
}
