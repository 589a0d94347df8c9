// Package fakegithub is a local stand-in for the part of the GitHub REST
// API the opm Action uses — the authenticated user, issue comments (list
// with Link-header pagination, create, update) and issues (list by state
// with pagination, create, update, close), tags (paginated) and release
// asset downloads (on the web host, without a token) — so the Action runs
// in-process in tests with no network. It enforces what GitHub enforces
// and the Action must respect: a bearer token, the 65,536-character body
// limit (422), a read-only token (403), and it records every request.
package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxBody is GitHub's limit on a comment body, in characters.
const MaxBody = 65536

// Comment is a stored issue comment.
type Comment struct {
	ID     int64
	Number int
	Login  string
	Body   string
}

// Server serves the fake API; its URL is the API root (GitHub.com style).
// It also answers under /api/v3 (GitHub Enterprise Server style).
type Server struct {
	*httptest.Server
	// Token is the bearer token every request must carry.
	Token string
	// Login is who the token is. Empty makes GET /user answer 403, as it
	// does for a workflow's GITHUB_TOKEN; comments are then created as
	// github-actions[bot].
	Login string
	// ReadOnly makes every write answer 403, like a fork's token.
	ReadOnly bool
	// Tags are what GET /repos/{o}/{r}/tags lists, in order.
	Tags []Tag
	// Releases holds release assets by tag and file name, served at
	// /{owner}/{repo}/releases/download/{tag}/{name} as github.com does
	// (the server's URL then stands for GITHUB_SERVER_URL too).
	Releases map[string]map[string][]byte

	mu         sync.Mutex
	comments   []*Comment
	nextID     int64
	issues     []*Issue
	nextNumber int
	requests   []string
}

// Tag is a git tag and the commit it points at.
type Tag struct {
	Name string
	SHA  string
}

// Issue is a stored issue.
type Issue struct {
	Number int
	Login  string
	Title  string
	Body   string
	// State is "open" or "closed".
	State string
}

// New starts a server; close it with Close.
func New(token string) *Server {
	s := &Server{Token: token, nextID: 1000, nextNumber: 100}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /user", s.user)
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/comments", s.list)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.create)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.update)
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues", s.listIssues)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues", s.createIssue)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/{number}", s.editIssue)
	mux.HandleFunc("GET /repos/{owner}/{repo}/tags", s.listTags)
	mux.HandleFunc("GET /{owner}/{repo}/releases/download/{tag}/{name}", s.download)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		// Public release assets need no token.
		if r.Header.Get("Authorization") != "Bearer "+s.Token && !strings.Contains(r.URL.Path, "/releases/download/") {
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/api/v3")
		mux.ServeHTTP(w, r)
	}))
	return s
}

// Seed stores a comment as if login had written it and returns its ID.
func (s *Server) Seed(number int, login, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(number, login, body).ID
}

// Comments returns copies of the comments on pull request number, oldest first.
func (s *Server) Comments(number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.Number == number {
			out = append(out, *c)
		}
	}
	return out
}

// Requests returns "METHOD /path?query" for every request so far.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) add(number int, login, body string) *Comment {
	s.nextID++
	c := &Comment{ID: s.nextID, Number: number, Login: login, Body: body}
	s.comments = append(s.comments, c)
	return c
}

func (s *Server) author() string {
	if s.Login == "" {
		return "github-actions[bot]"
	}
	return s.Login
}

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	if s.Login == "" {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"login": s.Login, "id": 1, "type": "User"})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	all := s.Comments(number)
	from, to := s.paginate(w, r, len(all))
	out := make([]map[string]any, 0, to-from)
	for _, c := range all[from:to] {
		out = append(out, s.json(r, &c))
	}
	writeJSON(w, http.StatusOK, out)
}

// paginate reads page and per_page (default 30, at most 100) as GitHub
// does, sets the Link header, and returns the slice of n items to answer.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, n int) (from, to int) {
	perPage := atoiOr(r.URL.Query().Get("per_page"), 30)
	perPage = min(max(perPage, 1), 100)
	page := max(atoiOr(r.URL.Query().Get("page"), 1), 1)
	last := max((n+perPage-1)/perPage, 1)
	if page < last {
		link := func(p int) string {
			u := *r.URL
			q := u.Query()
			q.Set("page", strconv.Itoa(p))
			q.Set("per_page", strconv.Itoa(perPage))
			u.RawQuery = q.Encode()
			return fmt.Sprintf("<%s%s>", s.URL, u.RequestURI())
		}
		w.Header().Set("Link", fmt.Sprintf(`%s; rel="next", %s; rel="last"`, link(page+1), link(last)))
	}
	return min((page-1)*perPage, n), min(page*perPage, n)
}

func (s *Server) listTags(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	tags := slices.Clone(s.Tags)
	s.mu.Unlock()
	from, to := s.paginate(w, r, len(tags))
	out := make([]map[string]any, 0, to-from)
	for _, t := range tags[from:to] {
		out = append(out, map[string]any{"name": t.Name, "commit": map[string]any{"sha": t.SHA}})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.Releases[r.PathValue("tag")][r.PathValue("name")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

// SeedIssue stores an open issue as if login had opened it and returns its number.
func (s *Server) SeedIssue(login, title, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addIssue(login, title, body).Number
}

// Issues returns copies of every issue, oldest first.
func (s *Server) Issues() []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Issue, 0, len(s.issues))
	for _, i := range s.issues {
		out = append(out, *i)
	}
	return out
}

func (s *Server) addIssue(login, title, body string) *Issue {
	s.nextNumber++
	i := &Issue{Number: s.nextNumber, Login: login, Title: title, Body: body, State: "open"}
	s.issues = append(s.issues, i)
	return i
}

// listIssues answers GET /repos/{o}/{r}/issues: state open (default),
// closed or all, oldest first, paginated.
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	var match []Issue
	for _, i := range s.Issues() {
		if state == "all" || i.State == state {
			match = append(match, i)
		}
	}
	from, to := s.paginate(w, r, len(match))
	out := make([]map[string]any, 0, to-from)
	for _, i := range match[from:to] {
		out = append(out, s.issueJSON(r, &i))
	}
	writeJSON(w, http.StatusOK, out)
}

type issueWrite struct {
	Title       *string `json:"title"`
	Body        *string `json:"body"`
	State       *string `json:"state"`
	StateReason *string `json:"state_reason"`
}

// readIssue reads and checks an issue write, answering the error itself.
func (s *Server) readIssue(w http.ResponseWriter, r *http.Request) (issueWrite, bool) {
	var in issueWrite
	if s.ReadOnly {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return in, false
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return in, false
	}
	if in.Body != nil && utf8.RuneCountInString(*in.Body) > MaxBody {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: body is too long (maximum is 65536 characters)")
		return in, false
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: state")
		return in, false
	}
	return in, true
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readIssue(w, r)
	if !ok {
		return
	}
	if in.Title == nil || *in.Title == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: title is missing")
		return
	}
	body := ""
	if in.Body != nil {
		body = *in.Body
	}
	s.mu.Lock()
	i := s.addIssue(s.author(), *in.Title, body)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.issueJSON(r, i))
}

func (s *Server) editIssue(w http.ResponseWriter, r *http.Request) {
	number, _ := strconv.Atoi(r.PathValue("number"))
	in, ok := s.readIssue(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.issues {
		if i.Number != number {
			continue
		}
		if in.Title != nil {
			i.Title = *in.Title
		}
		if in.Body != nil {
			i.Body = *in.Body
		}
		if in.State != nil {
			i.State = *in.State
		}
		writeJSON(w, http.StatusOK, s.issueJSON(r, i))
		return
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

func (s *Server) issueJSON(r *http.Request, i *Issue) map[string]any {
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	return map[string]any{
		"number":   i.Number,
		"title":    i.Title,
		"body":     i.Body,
		"state":    i.State,
		"user":     map[string]any{"login": i.Login},
		"html_url": fmt.Sprintf("https://github.example/%s/%s/issues/%d", owner, repo, i.Number),
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	c := s.add(number, s.author(), body)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.json(r, c))
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			if c.Login != s.author() {
				writeError(w, http.StatusForbidden, "You cannot edit someone else's comment")
				return
			}
			c.Body = body
			writeJSON(w, http.StatusOK, s.json(r, c))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

// body reads and checks a write's body, answering the error itself.
func (s *Server) body(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.ReadOnly {
		writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		return "", false
	}
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return "", false
	}
	if utf8.RuneCountInString(in.Body) > MaxBody {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: body is too long (maximum is 65536 characters)")
		return "", false
	}
	return in.Body, true
}

func (s *Server) json(r *http.Request, c *Comment) map[string]any {
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	return map[string]any{
		"id":       c.ID,
		"body":     c.Body,
		"user":     map[string]any{"login": c.Login},
		"html_url": fmt.Sprintf("https://github.example/%s/%s/pull/%d#issuecomment-%d", owner, repo, c.Number, c.ID),
	}
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}
