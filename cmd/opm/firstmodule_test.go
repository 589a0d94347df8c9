package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// docs/first-module.md as a newcomer follows it: each command of its
// first block, exactly as written, from an empty directory, against a
// real API server; and the files it shows are the files opm init writes.
func TestFirstModulePageRunsAsWritten(t *testing.T) {
	page, err := os.ReadFile("../../docs/first-module.md")
	assert.NilError(t, err)
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(page)
	assert.Assert(t, block != nil, "the page has no sh block")
	var commands []string
	for _, l := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		commands = append(commands, strings.TrimSpace(l))
	}
	assert.Assert(t, len(commands) >= 4, "%v", commands)

	t.Chdir(t.TempDir())
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	cs, err := kubernetes.NewForConfig(env.Config)
	assert.NilError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "hello-staging", metav1.DeleteOptions{})
	})
	for _, c := range commands {
		args := strings.Fields(c)
		assert.Equal(t, args[0], "opm", "the page's commands are opm's: %q", c)
		code, out, errOut := runOpm(t, args[1:]...)
		assert.Equal(t, code, 0, "%s:\n%s%s", c, out, errOut)
		if args[1] == "init" && len(args) == 3 {
			// The files the page shows, verbatim, are those written.
			for _, f := range []string{"cue.mod/module.cue", "deploy.cue", "modules/hello/hello.cue"} {
				b, err := os.ReadFile(filepath.Join(args[2], f))
				assert.NilError(t, err)
				assert.Check(t, strings.Contains(string(page), "```cue\n"+string(b)+"```"), "docs/first-module.md does not show %s as opm init writes it", f)
			}
		}
	}
	_, err = cs.AppsV1().Deployments("hello-staging").Get(t.Context(), "web", metav1.GetOptions{})
	assert.NilError(t, err, "the page's apply created the Deployment")
}

// opm init never overwrites: a second init in the same directory, or a
// module that exists, is refused with what to do instead, and a bad name
// says what a name may be.
func TestInitRefusesToOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	code, _, errOut := runOpm(t, "init", dir)
	assert.Equal(t, code, 0, errOut)
	code, _, errOut = runOpm(t, "init", dir)
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, "is a deployment directory already (it has cue.mod/module.cue); to add a module to it: opm init module NAME "+dir), errOut)
	code, _, errOut = runOpm(t, "init", "module", "hello", dir)
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, "modules/hello/hello.cue exists already"), errOut)
	code, _, errOut = runOpm(t, "init", "module", "Bad_Name", dir)
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, `module name "Bad_Name": use lower-case letters and digits`), errOut)
	code, _, errOut = runOpm(t, "init", "module", "x", t.TempDir())
	assert.Equal(t, code, 2)
	assert.Check(t, strings.Contains(errOut, "is not a deployment directory (no cue.mod/module.cue)"), errOut)
	// What --module names renders under that name.
	other := filepath.Join(t.TempDir(), "o")
	code, _, errOut = runOpm(t, "init", other, "--module", "shop", "--module-path", "acme.example/platform")
	assert.Equal(t, code, 0, errOut)
	code, out, errOut := runOpm(t, "render", other, "--env", "production")
	assert.Equal(t, code, 0, errOut)
	assert.Check(t, strings.Contains(out, "module-release.opmodel.dev/name: shop"), out)
	assert.Check(t, strings.Contains(out, "namespace: shop\n"), out)
}
