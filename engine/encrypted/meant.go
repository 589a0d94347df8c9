package encrypted

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/getsops/sops/v3/config"
	"sigs.k8s.io/yaml"
)

// MeantEncrypted says why the plaintext file at path should have been
// encrypted, or "": its name ends in .sops.yaml, .sops.yml or .sops.json
// (the convention Flux and helm-secrets use), or a creation rule with a
// path_regex in the nearest .sops.yaml above it matches it, as `sops -e`
// would pick that rule. A catch-all rule (no path_regex) says nothing: it
// is the default for whatever a team chooses to encrypt.
func MeantEncrypted(path string) string {
	base := strings.ToLower(filepath.Base(path))
	for _, ext := range []string{".sops.yaml", ".sops.yml", ".sops.json"} {
		if strings.HasSuffix(base, ext) {
			return "its name ends in " + ext
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	found, err := config.LookupConfigFile(abs)
	if err != nil || found.Path == "" {
		return ""
	}
	data, err := os.ReadFile(found.Path)
	if err != nil {
		return ""
	}
	var conf struct {
		CreationRules []struct {
			PathRegex string `json:"path_regex"`
		} `json:"creation_rules"`
	}
	if yaml.Unmarshal(data, &conf) != nil {
		return ""
	}
	// sops matches a rule against the path relative to the config file.
	rel := strings.TrimPrefix(abs, filepath.Dir(found.Path)+string(filepath.Separator))
	for i, r := range conf.CreationRules {
		if r.PathRegex == "" {
			return "" // sops stops at the first rule that matches: this one matches all
		}
		re, err := regexp.Compile(r.PathRegex)
		if err != nil {
			continue
		}
		if re.MatchString(rel) {
			return fmt.Sprintf("creation rule %d of %s (path_regex %q) matches it", i+1, found.Path, r.PathRegex)
		}
	}
	return ""
}

// OtherSopsFormat names a sops file of a format the values loader does not
// read (dotenv, INI), or "".
func OtherSopsFormat(data []byte) string {
	s := string(data)
	switch {
	case strings.Contains(s, "\nsops_mac=") || strings.HasPrefix(s, "sops_mac=") || strings.Contains(s, "\nsops_version="):
		return "dotenv"
	case strings.Contains(s, "\n[sops]") || strings.HasPrefix(s, "[sops]"):
		return "INI"
	}
	return ""
}
