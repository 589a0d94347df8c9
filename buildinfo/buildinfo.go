// Package buildinfo says which opm is running: its version, commit and
// build date, the Go and CUE versions it was built with and the catalog it
// embeds. Release builds set version, commit and date with -ldflags -X; a
// binary installed with `go install …@vX` gets them from the build
// information Go records; a plain `go build` says "devel".
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/opmodel/pipeline/catalog"
)

// Set by the linker (-X github.com/opmodel/pipeline/buildinfo.version=…);
// the only way a build can hand values to the program, never written at
// run time.
var (
	version string
	commit  string
	date    string
)

// Info describes one build of opm.
type Info struct {
	// Version is the release (v1.2.3), the module version `go install`
	// recorded, or "devel".
	Version string `json:"version"`
	// Commit is the source commit, when known.
	Commit string `json:"commit,omitempty"`
	// Modified is true when the commit's tree had local changes.
	Modified bool `json:"modified,omitempty"`
	// Date is when the binary was built (or the commit's time), RFC 3339.
	Date       string `json:"date,omitempty"`
	GoVersion  string `json:"goVersion"`
	CUEVersion string `json:"cueVersion"`
	// Catalog is the embedded OPM catalog module and its version.
	Catalog  string `json:"catalog"`
	Platform string `json:"platform"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, version, commit, date)
}

// fromBuild combines linker-set values (which win) with Go's build
// information.
func fromBuild(bi *debug.BuildInfo, version, commit, date string) Info {
	info := Info{
		Version: version, Commit: commit, Date: date,
		GoVersion:  runtime.Version(),
		CUEVersion: "unknown",
		Catalog:    catalog.ModulePath + " " + catalog.Version,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.Date == "" {
					info.Date = s.Value
				}
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "cuelang.org/go" {
				info.CUEVersion = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					info.CUEVersion = d.Replace.Version
				}
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

// ShortCommit is the first 12 characters of the commit, marked when the
// tree was modified.
func (i Info) ShortCommit() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if c != "" && i.Modified {
		c += "-dirty"
	}
	return c
}

// String is the one-line form the Action prints: "opm v1.2.3 (commit
// abc123, built …, go1.25, CUE v0.17.1, catalog …)".
func (i Info) String() string {
	parts := []string{}
	if c := i.ShortCommit(); c != "" {
		parts = append(parts, "commit "+c)
	}
	if i.Date != "" {
		parts = append(parts, "built "+i.Date)
	}
	parts = append(parts, i.GoVersion, "CUE "+i.CUEVersion, "catalog "+i.Catalog, i.Platform)
	return fmt.Sprintf("opm %s (%s)", i.Version, strings.Join(parts, ", "))
}

// Text is `opm version`'s output: one field per line.
func (i Info) Text() string {
	var b strings.Builder
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-9s %s\n", k+":", v)
		}
	}
	row("version", i.Version)
	row("commit", i.ShortCommit())
	row("built", i.Date)
	row("go", i.GoVersion)
	row("cue", i.CUEVersion)
	row("catalog", i.Catalog)
	row("platform", i.Platform)
	return b.String()
}

// Footer is the Markdown line that ends a pull-request comment or a job
// summary, so a reader knows which opm wrote it.
func (i Info) Footer() string {
	s := "<sub>opm " + i.Version
	if c := i.ShortCommit(); c != "" {
		s += " (" + c + ")"
	}
	return s + " · CUE " + i.CUEVersion + " · catalog " + i.Catalog + "</sub>"
}
