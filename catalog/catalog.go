// Package catalog embeds the OPM core CUE module (opmodel.dev/core@v0) in the
// binary, so a deployment directory that imports it loads with no registry
// and no network. The CUE files beside this one are the catalog itself.
package catalog

import (
	"embed"
	"io/fs"
)

// ModulePath is the CUE module path the catalog is served under.
const ModulePath = "opmodel.dev/core@v0"

// Version is the module version the embedded registry reports.
const Version = "v0.1.0"

//go:embed cue.mod/module.cue *.cue
var files embed.FS

// FS returns the catalog's files: cue.mod/module.cue and the package files.
func FS() fs.FS { return files }
