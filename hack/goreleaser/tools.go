//go:build tools

// Package tools pins goreleaser, which `make test` uses to check
// .goreleaser.yaml (`goreleaser check`). It is a module of its own so its
// many dependencies never reach the opm module's go.mod.
package tools

import _ "github.com/goreleaser/goreleaser/v2"
