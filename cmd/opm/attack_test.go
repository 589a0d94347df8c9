package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/opmodel/pipeline/engine/encrypted"
	"github.com/opmodel/pipeline/engine/manifest"
	"github.com/opmodel/pipeline/engine/render"
	"github.com/opmodel/pipeline/internal/attacktest"
	"github.com/opmodel/pipeline/internal/deploytest"
)

// The attacker reads the repository, CI logs, job summaries and pull
// request comments; a canary and a PIN flow from a SOPS file, or from the
// release's own values into a Secret, into a Secret, a ConfigMap (DSN,
// base64, upper case), a checksum annotation, an object name and a dotted
// key. Every command, in every output format, over a whole life cycle
// (apply, rotate, review, rollback, smoke, prune, delete), prints nothing
// that shows either value in any encoding, and no identifier against which
// any of the 10 000 PINs could be confirmed. Render's stdout is the one
// exception, the operator's manifests (docs/secrets.md). The SOPS case runs
// a second time with the modules written for OPM's v2 line.
func TestAttackerLearnsNothingFromTheCLI(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...) // for the modules of OPM's v2 line
	for _, source := range []deploytest.AttackSource{deploytest.AttackSOPS, deploytest.AttackRepo, deploytest.AttackSOPSV2} {
		t.Run(string(source), func(t *testing.T) {
			t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
			ns := env.Namespace(t)
			dir := deploytest.AttackDir(t, ns, source, deploytest.AttackCanary, deploytest.AttackPIN)
			gitRepo(t, dir, "the PIN and the canary")
			kc := "--kubeconfig=" + env.Kubeconfig
			prod := []string{"--env", "production", kc}

			var published strings.Builder
			opm := func(args ...string) string {
				t.Helper()
				code, out, errOut := runOpm(t, args...)
				assert.Assert(t, code == 0 || (code == 1 && (args[0] == "diff" || args[0] == "status")), "opm %v: exit %d\n%s%s", args, code, out, errOut)
				if args[0] == "render" {
					// The operator's manifests: only their summary is published.
					out = ""
				}
				fmt.Fprintf(&published, "$ opm %s\n%s\n%s\n", strings.Join(args, " "), errOut, out)
				return out
			}
			for _, o := range []string{"yaml", "json"} {
				opm("render", dir, "--env", "production", "-o", o)
			}
			for _, o := range []string{"text", "json", "markdown"} {
				opm(append([]string{"diff", dir, "-o", o}, prod...)...)
			}
			for _, o := range []string{"yaml", "json"} {
				opm("rbac", dir, "--env", "audit", kc, "-o", o)
			}
			for _, o := range []string{"text", "json"} {
				opm("plan", dir, "-o", o)
				opm("explain", dir, "--env", "production", "-o", o)
				opm(append([]string{"apply", "--no-wait", dir, "--dry-run", "-o", o}, prod...)...)
			}
			opm(append([]string{"apply", "--no-wait", dir}, prod...)...)
			for _, o := range []string{"text", "json", "markdown"} {
				opm(append([]string{"diff", dir, "-o", o}, prod...)...)
			}

			// The rotation, committed on a branch and reviewed against main.
			gitIn(t, dir, "checkout", "-q", "-b", "rotate")
			for name, content := range deploytest.AttackFiles(t, ns, source, deploytest.AttackCanary2, deploytest.AttackPIN2) {
				assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			gitIn(t, dir, "commit", "-q", "-am", "rotate the PIN and the canary")
			for _, o := range []string{"text", "json", "markdown"} {
				opm("review", dir, "--base", "main", "--env", "production", "-o", o)
				opm(append([]string{"diff", dir, "-o", o}, prod...)...)
			}
			// The same review planned and sharded: the plan, each shard's
			// partial (a CI artifact) and their merge.
			opm("review", "plan", dir, "--base", "main", "--env", "production", "--shards", "2")
			plan := filepath.Join(t.TempDir(), "plan.json")
			assert.NilError(t, os.WriteFile(plan, []byte(opm("review", "plan", dir, "--base", "main", "--env", "production", "--shards", "2", "-o", "json")), 0o644))
			var parts []string
			for _, sh := range []string{"1/2", "2/2"} {
				part := filepath.Join(t.TempDir(), "part.json")
				assert.NilError(t, os.WriteFile(part, []byte(opm("review", dir, "--base", "main", "--env", "production", "--shard", sh, "--plan", plan)), 0o644))
				parts = append(parts, part)
			}
			for _, o := range []string{"text", "json", "markdown"} {
				merged := opm(append([]string{"review", "merge", "-o", o}, parts...)...)
				assert.Assert(t, strings.Contains(merged, "pin"), "the merged review shows the releases: %s", merged)
			}
			opm(append([]string{"apply", "--no-wait", dir, "-o", "json"}, prod...)...)
			for _, o := range []string{"table", "json", "yaml"} {
				opm(append([]string{"status", dir, "-o", o}, prod...)...)
			}
			for _, o := range []string{"table", "json"} {
				opm("history", "pin", "-n", ns, kc, "-o", o)
				out := opm(append([]string{"history", "attack", dir, "-o", o}, prod...)...)
				if o == "table" {
					assertColumnsAligned(t, out, "CHANGE")
				}
			}
			// Back to the first change, named as history showed it.
			var h struct {
				Releases []struct {
					Changes []struct {
						ChangeID string `json:"changeId"`
					} `json:"changes"`
				} `json:"releases"`
			}
			assert.NilError(t, json.Unmarshal([]byte(opm(append([]string{"history", "pin", dir, "-o", "json"}, prod...)...)), &h))
			changes := h.Releases[0].Changes
			assert.Equal(t, len(changes), 2)
			assert.Assert(t, strings.HasPrefix(changes[1].ChangeID, manifest.SealedChangePrefix), "history shows %s", changes[1].ChangeID)
			opm(append([]string{"rollback", "pin", dir, "--to", changes[1].ChangeID, "-o", "json"}, prod...)...)
			opm(append([]string{"rollback", "pin", dir, "--to", changes[0].ChangeID}, prod...)...)
			for _, o := range []string{"text", "json", "markdown"} {
				opm("smoke", dir, "--env", "production", kc, "-o", o)
			}
			for _, o := range []string{"text", "json"} {
				opm(append([]string{"prune", dir, "--dry-run", "-o", o}, prod...)...)
				opm(append([]string{"delete", dir, "--dry-run", "-o", o}, prod...)...)
			}
			opm(append([]string{"delete", dir, "-o", "json"}, prod...)...)

			text := published.String()
			assert.Assert(t, len(attacktest.Leaks(text)) == 0, "the outputs show %v:\n%s", attacktest.Leaks(text), text)
			bruteForcePIN(t, dir, text)
		})
	}
}

// bruteForcePIN renders the pin release at main and tries every PIN
// against what was published (deploytest.BruteForcePIN).
func bruteForcePIN(t *testing.T, dir, published string) {
	t.Helper()
	gitIn(t, dir, "checkout", "-q", "main")
	rels, err := render.Render(context.Background(), render.Options{Dir: dir, Environment: "production", Releases: []string{"pin"},
		Keys: encrypted.Keys{AgeIdentities: []string{deploytest.SopsAgeKey()}}})
	assert.NilError(t, err)
	attacktest.BruteForcePIN(t, rels[0], published)
}

// The error paths: a pull request makes the module derive a value from the
// canary that a constraint refuses (upper-cased against a lower-case
// pattern), so every command fails on it. The CUE error would quote the
// derived value; nothing any command prints shows the canary in any
// encoding, and the error still says where and what. (A canary written in
// the repository's own values is secret only once a render shows it
// reaching a Secret; a render that fails cannot, docs/secrets.md.)
func TestAttackerLearnsNothingFromFailures(t *testing.T) {
	deploytest.Registry(t, deploytest.V2Modules()...)
	for _, source := range []deploytest.AttackSource{deploytest.AttackSOPS, deploytest.AttackSOPSV2} {
		t.Run(string(source), func(t *testing.T) {
			t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
			ns := env.Namespace(t)
			dir := deploytest.AttackDir(t, ns, source, deploytest.AttackCanary, deploytest.AttackPIN)
			gitRepo(t, dir, "the canary")
			gitIn(t, dir, "checkout", "-q", "-b", "shout")
			mod := filepath.Join(dir, "attack", "attack.cue")
			b, err := os.ReadFile(mod)
			assert.NilError(t, err)
			shout := strings.Replace(string(b), "\treplicas: *1 | int\n", "\treplicas: *1 | int\n\tshout: strings.ToUpper(canary) & =~\"^[a-z0-9-]+$\"\n", 1)
			assert.Assert(t, shout != string(b))
			assert.NilError(t, os.WriteFile(mod, []byte(shout), 0o644))
			gitIn(t, dir, "commit", "-q", "-am", "shout")

			kc := "--kubeconfig=" + env.Kubeconfig
			prod := []string{"--env", "production", kc}
			var published strings.Builder
			for _, args := range [][]string{
				{"render", dir, "--env", "production"},
				append([]string{"diff", dir, "-o", "json"}, prod...),
				append([]string{"diff", dir}, prod...),
				append([]string{"apply", "--no-wait", dir}, prod...),
				append([]string{"apply", "--no-wait", dir, "-o", "json"}, prod...),
				{"explain", dir, "--env", "production"},
				{"review", dir, "--base", "main"},
				{"review", dir, "--base", "main", "-o", "markdown"},
				{"review", dir, "--base", "main", "--no-skip", "-o", "json"},
			} {
				code, out, errOut := runOpm(t, args...)
				assert.Check(t, code != 0 || args[0] == "explain", "opm %v succeeded on a release that cannot render:\n%s%s", args, out, errOut)
				fmt.Fprintf(&published, "$ opm %s\n%s\n%s\n", strings.Join(args, " "), errOut, out)
			}
			text := published.String()
			assert.Check(t, is.Len(attacktest.Leaks(text), 0), "what the failures published shows the canary:\n%s", text)
			assert.Check(t, strings.Contains(text, "out of bound"), "the failures no longer say what is wrong:\n%s", text)
			assert.Check(t, strings.Contains(text, "attack.cue:"), "the failures no longer say where:\n%s", text)
		})
	}
}

// assertColumnsAligned checks that in text every row under the header
// line starting with header begins its columns where the header's do.
func assertColumnsAligned(t *testing.T, text, header string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, header) {
			continue
		}
		var starts []int
		for j := 1; j < len(l); j++ {
			if l[j] != ' ' && l[j-1] == ' ' && j >= 2 && l[j-2] == ' ' {
				starts = append(starts, j)
			}
		}
		for _, row := range lines[i+1:] {
			if row == "" {
				break
			}
			for _, c := range starts {
				assert.Check(t, c < len(row) && row[c-1] == ' ' && row[c] != ' ', "row %q does not start a column at %d as %q does", row, c, l)
			}
		}
	}
}

// API refusals quote what they refuse: a label derived from the PIN
// ("p0815!", not a valid label value) and a port the PIN multiplies out of
// range (815 × 100 = 81500). Diff's server-side dry run and apply's apply
// are refused, in text and JSON; neither the PIN nor what it derives into
// is printed, quoted or not, and each refusal still names the object and
// the field.
func TestAttackerLearnsNothingFromRefusals(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	ns := env.Namespace(t)
	dir := deploytest.AttackDir(t, ns, deploytest.AttackSOPS, deploytest.AttackCanary, deploytest.AttackPIN)
	patchAttackModule(t, dir, "\t\"strconv\"\n", `{
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: "labelled", labels: pin: "p\(#config.pin)!"}
		data: purpose: "a label the API server refuses"
	}, {
		apiVersion: "v1"
		kind:       "Service"
		metadata: name: "ported"
		spec: {selector: app: "x", ports: [{name: "web", port: strconv.Atoi(#config.pin) * 100}]}
	}`)

	kc := "--kubeconfig=" + env.Kubeconfig
	prod := []string{"--env", "production", kc}
	var published strings.Builder
	for _, args := range [][]string{
		append([]string{"diff", dir}, prod...),
		append([]string{"diff", dir, "-o", "json"}, prod...),
		append([]string{"apply", "--no-wait", dir}, prod...),
		append([]string{"apply", "--no-wait", dir, "-o", "json"}, prod...),
	} {
		code, out, errOut := runOpm(t, args...)
		assert.Check(t, code != 0, "opm %v succeeded on objects the API server refuses:\n%s%s", args, out, errOut)
		fmt.Fprintf(&published, "$ opm %s\n%s\n%s\n", strings.Join(args, " "), errOut, out)
	}
	text := published.String()
	assert.Check(t, is.Len(attacktest.Leaks(text), 0), "the refusals show the PIN:\n%s", text)
	for _, derived := range []string{"81500", "p0815!", "p0815"} {
		assert.Check(t, !strings.Contains(text, derived), "the refusals show %q, derived from the PIN:\n%s", derived, text)
	}
	// Which refusal a command meets first depends on which dry run answers
	// first: each one shown still names its object and field.
	named := 0
	for object, field := range map[string]string{`ConfigMap "labelled" is invalid`: "metadata.labels", `Service "ported" is invalid`: "spec.ports[0].port"} {
		if strings.Contains(text, object) {
			named++
			assert.Check(t, strings.Contains(text, object+": "+field) || strings.Contains(text, object+": ["+field), "the refusal of %s no longer names the field %s:\n%s", object, field, text)
		}
	}
	assert.Check(t, named > 0, "no refusal names its object:\n%s", text)
}

// patchAttackModule rewrites the attack fixture's module: the import
// block gains imports, and the objects list gains objects.
func patchAttackModule(t *testing.T, dir, imports, objects string) {
	t.Helper()
	mod := filepath.Join(dir, "attack", "attack.cue")
	b, err := os.ReadFile(mod)
	assert.NilError(t, err)
	patched := strings.Replace(string(b), "\t\"strings\"\n", imports+"\t\"strings\"\n", 1)
	patched = strings.Replace(patched, "\t\tdata: purpose: \"named after the PIN\"\n\t}]", "\t\tdata: purpose: \"named after the PIN\"\n\t}, "+objects+"]", 1)
	assert.Assert(t, strings.Count(patched, "named after the PIN\"\n\t}, ") == 1, "the module's shape changed: %s", patched)
	assert.NilError(t, os.WriteFile(mod, []byte(patched), 0o644))
}

// fenceRE finds a fence post's letter.
var fenceRE = regexp.MustCompile(`fence-([a-z])\b`)

// markerRE finds a masked value and the key it is shown under.
var markerRE = regexp.MustCompile(`([A-Za-z0-9_.-]+)"?: "?(\(masked, hmac:[0-9a-f]{12}\))`)

// A pull request (its author cannot read the SOPS file) adds a Secret that
// holds the dictionary of every character a token can have, one key each,
// beside one key per character of the SOPS canary, and ConfigMaps named
// from the canary's first character among public "fence posts" named from
// every character. Were a marker a function of the value alone, the review
// would spell the canary out key by key; were masked names listed in their
// real order, the fence posts would. The review (markdown, text, JSON) and
// the diff show no marker under two keys, and list every object whose name
// a secret reaches after the public ones, in an order its real name does
// not decide.
func TestAttackerLearnsNothingFromMarkersOrOrder(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	ns := env.Namespace(t)
	dir := deploytest.AttackDir(t, ns, deploytest.AttackSOPS, deploytest.AttackCanary, deploytest.AttackPIN)
	gitRepo(t, dir, "the canary")
	gitIn(t, dir, "checkout", "-q", "-b", "dictionary")
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
	patchAttackModule(t, dir, "", `{
		apiVersion: "v1"
		kind:       "Secret"
		metadata: name: "dictionary"
		stringData: {
			for c in strings.Split("`+alphabet+`", "") {"dict-\(c)": c}
			for i, c in strings.Split(#config.canary, "") {"tok-\(i)": c}
			for i, c in strings.Split(#config.pin, "") {"pin-\(i)": c}
		}
	}, for c in strings.Split("abcdefghijklmnopqrstuvwxyz", "") {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: "fence-\(c)"
		data: post: c
	}, {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: "fence-\(strings.ToLower(strings.SliceRunes(#config.canary, 0, 1)))x"
		data: post: "between two posts"
	}`)
	gitIn(t, dir, "commit", "-q", "-am", "a dictionary")

	kc := "--kubeconfig=" + env.Kubeconfig
	var published strings.Builder
	for _, args := range [][]string{
		{"review", dir, "--base", "main"},
		{"review", dir, "--base", "main", "-o", "markdown"},
		{"review", dir, "--base", "main", "-o", "json"},
		{"diff", dir, "--env", "production", kc},
		{"diff", dir, "--env", "production", kc, "-o", "json"},
		{"apply", "--no-wait", dir, "--env", "production", kc},
		{"delete", dir, "--env", "production", kc},
	} {
		code, out, errOut := runOpm(t, args...)
		assert.Check(t, code == 0 || code == 1, "opm %v: exit %d\n%s%s", args, code, out, errOut)
		out += errOut // apply's progress
		fmt.Fprintf(&published, "$ opm %s\n%s\n%s\n", strings.Join(args, " "), errOut, out)

		// Markers: none shown under two keys.
		keysOf := map[string]map[string]bool{}
		for _, m := range markerRE.FindAllStringSubmatch(out, -1) {
			if keysOf[m[2]] == nil {
				keysOf[m[2]] = map[string]bool{}
			}
			keysOf[m[2]][m[1]] = true
		}
		dict := 0
		for marker, keys := range keysOf {
			assert.Check(t, len(keys) == 1, "opm %v shows %s under %d keys, linking them: %v", args, marker, len(keys), keys)
			for k := range keys {
				if strings.HasPrefix(k, "dict-") {
					dict++
				}
			}
		}
		if args[0] == "review" && !slices.Contains(args, "json") {
			assert.Check(t, dict >= len(alphabet), "opm %v no longer shows the dictionary's markers (%d): the test proves nothing", args, dict)
		}

		// Order: no hidden name sits inside an ascending run of fence
		// posts, where its neighbours would spell its first character.
		lines := strings.Split(out, "\n")
		post := func(l string) byte {
			if m := fenceRE.FindStringSubmatch(l); m != nil {
				return m[1][0]
			}
			return 0
		}
		posts := 0
		for i, l := range lines {
			if post(l) != 0 {
				posts++
			}
			if !strings.Contains(l, "/(secret)") && !strings.Contains(l, "secret-name-") && !strings.Contains(l, `"(secret)"`) {
				continue
			}
			var before, after byte
			for j := i - 1; j >= 0 && before == 0; j-- {
				before = post(lines[j])
			}
			for j := i + 1; j < len(lines) && after == 0; j++ {
				after = post(lines[j])
			}
			assert.Check(t, before == 0 || after == 0 || before >= after,
				"opm %v lists a hidden name between fence-%c and fence-%c (line %d):\n%s", args, before, after, i+1, out)
		}
		assert.Check(t, posts >= 26, "opm %v no longer lists the fence posts: the test proves nothing", args)
	}
	text := published.String()
	assert.Check(t, is.Len(attacktest.Leaks(text), 0), "what the review published shows the canary:\n%s", text)
}

// A SOPS file whose unauthenticated type tag was flipped (type:str →
// type:bytes) makes the sops library panic. On the base side of a review,
// and in render, diff and apply, it is a clear error naming the file: no
// crash, no stack trace, nothing of the file's values.
func TestTamperedTypeTagIsAnErrorEverywhere(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY", deploytest.SopsAgeKey())
	ns := env.Namespace(t)
	dir := deploytest.AttackDir(t, ns, deploytest.AttackSOPS, deploytest.AttackCanary, deploytest.AttackPIN)
	sopsFile := filepath.Join(dir, "secrets", "production.sops.yaml")
	good, err := os.ReadFile(sopsFile)
	assert.NilError(t, err)
	tampered := strings.Replace(string(good), ",type:str]", ",type:bytes]", 1)
	assert.Assert(t, tampered != string(good))
	assert.NilError(t, os.WriteFile(sopsFile, []byte(tampered), 0o644))
	gitRepo(t, dir, "a tampered file on main")
	gitIn(t, dir, "checkout", "-q", "-b", "restore")
	assert.NilError(t, os.WriteFile(sopsFile, good, 0o644))
	gitIn(t, dir, "commit", "-q", "-am", "the file restored")

	kc := "--kubeconfig=" + env.Kubeconfig
	check := func(args ...string) {
		t.Helper()
		code, out, errOut := runOpm(t, args...)
		text := out + errOut
		assert.Check(t, code != 0, "opm %v succeeded with a tampered file:\n%s", args, text)
		assert.Check(t, strings.Contains(text, "production.sops.yaml"), "opm %v does not name the file:\n%s", args, text)
		assert.Check(t, !strings.Contains(text, "goroutine ") && !strings.Contains(text, "panic"), "opm %v crashed:\n%s", args, text)
		assert.Check(t, is.Len(attacktest.Leaks(text), 0), "opm %v shows a value:\n%s", args, text)
	}
	check("review", dir, "--base", "main", "--no-skip")
	gitIn(t, dir, "checkout", "-q", "main")
	check("render", dir, "--env", "production")
	check("diff", dir, "--env", "production", kc)
	check("apply", "--no-wait", dir, "--env", "production", kc)
}
