// Package redact is the one point every byte leaving the process passes
// through: the CLI's stdout and stderr, the Action's outputs, job summary,
// comments, issues and log, and the Dagger functions' return values.
//
// Structured outputs are masked where they are built, by path (values
// from a secret source, fields engine/taint found a secret reaches, a
// Secret's data), which never masks a public field for equalling a
// secret. This package is the last line behind them, for what free text
// can carry (an error quoting a value, a log line naming an object):
//
//   - secret values of MinLength characters or more, and what they derive
//     into, in the encodings a leak takes (plain, upper and lower case,
//     base64 and base64url, hex, URL- and JSON-escaped, and their sha1,
//     sha256 and md5), become redact.Mark;
//   - the manifest digest and change ID of a release that holds secret data
//     become their sealed forms (manifest.Sealer), whichever output prints
//     them, so none of them is a recomputable guessing oracle;
//   - an object name that carries a secret becomes a stable stand-in,
//     sealed under the same key.
//
// Shorter secrets (a PIN) are not searched for in free text: masking a
// four-digit string everywhere it occurs would both wreck unrelated text
// and tell a reader which public strings equal the PIN. They are masked by
// path where structured output is built, and errors that quote them are
// redacted where the values are known (engine/values.Redact).
//
// The Redactor travels in the context (With, From): front doors create
// it, the engine registers what it renders and reads.
//
// # One vocabulary for hiding secrets
//
// Every package that hides a secret uses these words, each for one thing:
//
//   - mask: replace a value by its path where structured output is built —
//     a diff's field (diff.Masker, a keyed marker per place), the values
//     shown (taint.Mask). Only the field is touched, never an equal public
//     value elsewhere.
//   - redact: replace known secret strings in free text — this package's
//     Redactor for every output, values.Redact and values.RedactQuoted for
//     an error or refusal quoting a value of the release, however short.
//   - Mark ("(secret)"): what a masked or redacted value becomes, the one
//     spelling in every output.
//   - seal: a keyed digest in place of an identifier a guess could check
//     (manifest.Sealer: digests and change IDs of releases holding secrets).
//   - hide, stand-in: an object name that carries a secret is shown as a
//     stable stand-in (Name, Hidden), and hidden names are listed last.
//   - withhold: an object's content is left out whole when which of its
//     fields a secret reached cannot be told (preview.Withheld).
//   - trace: find which rendered fields a secret reaches, by rendering
//     again with sentinels (engine/taint, the stand-in render).
package redact

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/opmodel/pipeline/engine/manifest"
)

// MinLength is the shortest secret searched for in free text.
const MinLength = 8

// Mark replaces a secret value in free text.
const Mark = "(secret)"

// NamePrefix starts the stand-in of an object name that carries a secret.
const NamePrefix = "secret-name-"

// Redactor replaces registered secrets and identifiers in text. It is safe
// for concurrent use; the zero value and nil redact nothing.
type Redactor struct {
	sealer *manifest.Sealer

	mu       sync.Mutex
	subst    map[string]string
	replacer *strings.Replacer // rebuilt after every change
	// short are names shorter than MinLength, replaced only as whole
	// names (not inside a longer run of name characters). Copied on write.
	short map[string]string
	// names are the object names registered (Name), by their stand-ins.
	names map[string]string
}

// New returns a Redactor sealing identifiers with sealer (nil: a random
// key of this run).
func New(sealer *manifest.Sealer) *Redactor {
	if sealer == nil {
		sealer = manifest.NewSealer(nil)
	}
	return &Redactor{sealer: sealer, subst: map[string]string{}}
}

type ctxKey struct{}

// With returns ctx carrying r.
func With(ctx context.Context, r *Redactor) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// From returns the Redactor ctx carries, or nil (which registers and
// redacts nothing: a library caller that prints nothing needs none).
func From(ctx context.Context) *Redactor {
	r, _ := ctx.Value(ctxKey{}).(*Redactor)
	return r
}

// Sealer is the sealer r seals identifiers with.
func (r *Redactor) Sealer() *manifest.Sealer {
	if r == nil {
		return nil
	}
	return r.sealer
}

func (r *Redactor) add(from, to string) {
	if from == "" || from == to {
		return
	}
	if _, ok := r.subst[from]; ok {
		return
	}
	r.subst[from] = to
	r.replacer = nil
}

// Secrets registers secret values (and values derived from them) of
// MinLength or more, in every encoding a leak takes.
func (r *Redactor) Secrets(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) < MinLength {
			continue
		}
		for _, e := range Encodings(v) {
			r.add(e, Mark)
		}
	}
}

// Literal registers values replaced by to as they are, without
// encodings: credentials of the front door itself (a kubeconfig's token),
// which only ever leak verbatim.
func (r *Redactor) Literal(to string, values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) >= MinLength {
			r.add(v, to)
		}
	}
}

// Encodings returns v in the forms a leak takes.
func Encodings(v string) []string {
	b := []byte(v)
	s1, s256, m5 := sha1.Sum(b), sha256.Sum256(b), md5.Sum(b)
	js, _ := json.Marshal(v)
	out := []string{
		v, strings.ToUpper(v), strings.ToLower(v),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v), url.PathEscape(v), string(js[1 : len(js)-1]),
	}
	for _, h := range [][]byte{b, s1[:], s256[:], m5[:]} {
		x := hex.EncodeToString(h)
		out = append(out, x, strings.ToUpper(x))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Sensitive registers the identifiers of a release that holds secret
// data: wherever they are printed, their sealed forms are.
func (r *Redactor) Sensitive(digest, changeID string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if hexPart, ok := strings.CutPrefix(digest, "sha256:"); ok && len(hexPart) >= 12 {
		sealed := strings.TrimPrefix(r.sealer.Digest(digest), manifest.SealedDigestPrefix)
		r.add(digest, manifest.SealedDigestPrefix+sealed)
		// Bare, and shortened as tables show it (report.ShortDigest).
		r.add(hexPart, sealed)
		r.add(hexPart[:12], "hmac:"+sealed[:12])
	} else {
		r.add(digest, r.sealer.Digest(digest))
	}
	if len(changeID) >= 8 {
		r.add(changeID, r.sealer.ChangeID(changeID))
	}
}

// Name registers an object name that carries a secret and returns its
// stand-in: the same for the same name within a seal key.
func (r *Redactor) Name(name string) string {
	if r == nil || name == "" {
		return name
	}
	stand := NamePrefix + strings.TrimPrefix(r.sealer.ChangeID("object name\x00"+name), manifest.SealedChangePrefix)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]string{}
	}
	r.names[name] = stand
	if len(name) < MinLength {
		short := maps.Clone(r.short)
		if short == nil {
			short = map[string]string{}
		}
		short[name] = stand
		r.short = short
		return stand
	}
	r.add(name, stand)
	return stand
}

// Hidden reports whether name is an object name that carries a secret
// (registered with Name), and its stand-in: a list that shows such names
// orders them by the stand-in, never by the name it hides.
func (r *Redactor) Hidden(name string) (stand string, ok bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	stand, ok = r.names[name]
	return stand, ok
}

// String returns s with everything registered replaced.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	s = r.get().Replace(s)
	r.mu.Lock()
	short := r.short
	r.mu.Unlock()
	if len(short) == 0 {
		return s
	}
	// Each maximal run of name characters that is a short name.
	var b strings.Builder
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		run := s[start:end]
		if stand, ok := short[run]; ok {
			run = stand
		}
		b.WriteString(run)
		start = -1
	}
	for i := 0; i < len(s); i++ {
		if isNameChar(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
		b.WriteByte(s[i])
	}
	flush(len(s))
	return b.String()
}

// isNameChar reports whether c is one of the characters object names are
// made of: a short name is replaced only as a whole run of them.
func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func (r *Redactor) get() *strings.Replacer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replacer == nil {
		keys := make([]string, 0, len(r.subst))
		for k := range r.subst {
			keys = append(keys, k)
		}
		// Longest first: a registered fragment never hides a longer value.
		slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
		pairs := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			pairs = append(pairs, k, r.subst[k])
		}
		r.replacer = strings.NewReplacer(pairs...)
	}
	return r.replacer
}

// Error returns err with its message redacted; nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil {
		return err
	}
	return Redacted(err, r.String)
}

// Redacted returns err printing what redact makes of its message, keeping
// the chain for errors.Is/As (exit codes); err itself when nothing
// changed, nil for nil. The one redacted error of every package.
func Redacted(err error, redact func(string) string) error {
	if err == nil {
		return nil
	}
	if msg := redact(err.Error()); msg != err.Error() {
		return redactedError{msg: msg, err: err}
	}
	return err
}

// redactedError keeps the original for errors.Is/As (exit codes), while
// printing only the redacted message.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Writer returns a writer that redacts what it passes to w, line by line
// (a value is never split across two writes of one line). Flush writes
// an unterminated last line.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Writer is Redactor.Writer's writer.
type Writer struct {
	r   *Redactor
	w   io.Writer
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	i := bytes.LastIndexByte(w.buf.Bytes(), '\n')
	if i < 0 {
		return len(p), nil
	}
	line := w.buf.Next(i + 1)
	if _, err := io.WriteString(w.w, w.r.String(string(line))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() == 0 {
		return nil
	}
	s := w.r.String(w.buf.String())
	w.buf.Reset()
	_, err := io.WriteString(w.w, s)
	return err
}

// Value redacts, in place, every settable string v points to, however
// deep: the fields of a result struct (exported ones), slices and maps of
// them. A Dagger function passes its return value through it.
func (r *Redactor) Value(v any) {
	if r == nil {
		return
	}
	r.value(reflect.ValueOf(v))
}

func (r *Redactor) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			r.value(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				r.value(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			r.value(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			if e.Kind() == reflect.String {
				v.SetMapIndex(k, reflect.ValueOf(r.String(e.String())).Convert(e.Type()))
			}
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(r.String(v.String()))
		}
	}
}

// Unseal returns the one of changeIDs whose sealed form is sealed: a
// change ID copied from a published output (`opm history`, the Action's
// outputs) names the change it stands for, under the same seal key.
func (r *Redactor) Unseal(sealed string, changeIDs []string) (string, bool) {
	if r == nil || !strings.HasPrefix(sealed, manifest.SealedChangePrefix) {
		return "", false
	}
	for _, id := range changeIDs {
		if r.sealer.ChangeID(id) == sealed {
			return id, true
		}
	}
	return "", false
}
