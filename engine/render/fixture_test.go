package render_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/render"
)

// appModule is a module with the #config of the environment RFC's
// scenarios: a required image, defaults, an enum and a nested struct.
const appModule = `package app

import core "github.com/opmodel/pipeline/catalog@v0"

core.#Module

metadata: {
	apiVersion: "test.example/deploy/app@v0"
	name:       "app"
	version:    "1.0.0"
}

#config: {
	image!:       string
	replicaCount: *1 | int
	logLevel:     *"info" | "debug" | "warn" | "error"
	db: {
		host: *"db.local" | string
		port: *5432 | int
	}
}

#components: web: {
	core.#Workload
	core.#Service
	spec: {
		workload: {
			type:     "stateless"
			replicas: #config.replicaCount
			container: {
				image: #config.image
				env: {
					LOG_LEVEL: #config.logLevel
					DB_HOST:   #config.db.host
					DB_PORT:   "\(#config.db.port)"
				}
			}
		}
		service: ports: http: port: 80
	}
}
`

const rootHeader = `package deploy

import (
	core "github.com/opmodel/pipeline/catalog@v0"
	"test.example/deploy/app"
)

environments: [Name=string]: core.#Environment & {metadata: name: Name}
releases: [Name=string]: core.#ModuleRelease & {metadata: name: *Name | _}

_app: app
`

// deployment writes a deployment directory with the app module and the
// given root-package body, returning its path.
func deployment(t testing.TB, body string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"cue.mod/module.cue": "module: \"test.example/deploy@v0\"\nlanguage: version: \"v0.12.0\"\n",
		"app/app.cue":        appModule,
		"deploy.cue":         rootHeader + body,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		files[extra[i]] = extra[i+1]
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func renderOne(t testing.TB, dir, env string, files ...string) *render.Release {
	t.Helper()
	rels, err := render.Render(context.Background(), render.Options{Dir: dir, Environment: env, ValuesFiles: files})
	assert.NilError(t, err)
	assert.Equal(t, len(rels), 1)
	return rels[0]
}

func renderErr(t testing.TB, dir, env string, files ...string) error {
	t.Helper()
	_, err := render.Render(context.Background(), render.Options{Dir: dir, Environment: env, ValuesFiles: files})
	assert.Assert(t, err != nil, "render succeeded, want an error")
	return err
}

// writeDir writes files (path → content) into a new directory.
func writeDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}
