// Package fakegithub is a local stand-in for the part of the GitHub REST
// API the opm Action uses — the authenticated user and issue comments
// (list with Link-header pagination, create, update) — so the Action runs
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

	mu       sync.Mutex
	comments []*Comment
	nextID   int64
	requests []string
}

// New starts a server; close it with Close.
func New(token string) *Server {
	s := &Server{Token: token, nextID: 1000}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /user", s.user)
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/comments", s.list)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.create)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.update)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+s.Token {
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
	perPage := atoiOr(r.URL.Query().Get("per_page"), 30)
	perPage = min(max(perPage, 1), 100)
	page := max(atoiOr(r.URL.Query().Get("page"), 1), 1)
	all := s.Comments(number)
	last := max((len(all)+perPage-1)/perPage, 1)
	from, to := min((page-1)*perPage, len(all)), min(page*perPage, len(all))
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
	out := make([]map[string]any, 0, to-from)
	for _, c := range all[from:to] {
		out = append(out, s.json(r, &c))
	}
	writeJSON(w, http.StatusOK, out)
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
