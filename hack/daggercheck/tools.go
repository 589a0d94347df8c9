//go:build tools

package main

// The Go SDK's code generator, built by `make` into bin/dagger-codegen from
// the version this module pins: the same generator the engine runs when it
// loads the module.
import _ "github.com/dagger/dagger/cmd/codegen"
