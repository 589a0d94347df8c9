package main

import (
	"strings"

	"github.com/sethvargo/go-githubactions"
)

// event is what the Action needs from the event payload.
type event struct {
	name string
	// pr is set for pull_request and pull_request_target events.
	pr *pullRequest
	// before is the commit a push started from; all zeros for a new branch.
	before string
}

type pullRequest struct {
	number   int
	baseSHA  string
	baseRef  string
	headSHA  string
	baseRepo string
	headRepo string
}

// fork reports whether the pull request comes from another repository.
// On pull_request events its token is read-only, so it cannot comment.
func (p *pullRequest) fork() bool {
	return p.headRepo != "" && p.baseRepo != "" && !strings.EqualFold(p.headRepo, p.baseRepo)
}

func parseEvent(gh *githubactions.GitHubContext) event {
	ev := event{name: gh.EventName}
	if pr, ok := gh.Event["pull_request"].(map[string]any); ok && strings.HasPrefix(gh.EventName, "pull_request") {
		base, head := obj(pr, "base"), obj(pr, "head")
		ev.pr = &pullRequest{
			number:   num(pr, "number"),
			baseSHA:  str(base, "sha"),
			baseRef:  str(base, "ref"),
			headSHA:  str(head, "sha"),
			baseRepo: str(obj(base, "repo"), "full_name"),
			headRepo: str(obj(head, "repo"), "full_name"),
		}
		if ev.pr.number == 0 {
			ev.pr.number = num(gh.Event, "number")
		}
	}
	if gh.EventName == "push" {
		ev.before = str(gh.Event, "before")
	}
	return ev
}

// newBranch reports whether a push created its branch (no before).
func (e event) newBranch() bool {
	return e.name == "push" && strings.Trim(e.before, "0") == ""
}

func obj(m map[string]any, k string) map[string]any {
	v, _ := m[k].(map[string]any)
	return v
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

// num reads a JSON number (decoded as float64).
func num(m map[string]any, k string) int {
	v, _ := m[k].(float64)
	return int(v)
}
