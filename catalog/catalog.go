// Package catalog embeds the pipeline's own CUE catalog in the binary, so a
// deployment directory that imports it loads with no registry and no
// network. The CUE files beside this one are the catalog itself.
//
// The catalog lives at a module path of its own, one the Open Platform Model
// never publishes: the engine serves it only at that path and version, and
// every other module — opmodel.dev/core included — comes from where CUE
// would load it (CUE_REGISTRY, the cache), never from the binary.
package catalog

import (
	"embed"
	"io/fs"
)

// ModulePath is the CUE module path the catalog is served under.
const ModulePath = "github.com/opmodel/pipeline/catalog@v0"

// Version is the only module version the embedded registry answers for.
const Version = "v0.1.0"

//go:embed cue.mod/module.cue *.cue
var files embed.FS

// FS returns the catalog's files: cue.mod/module.cue and the package files.
func FS() fs.FS { return files }
