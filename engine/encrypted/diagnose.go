package encrypted

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/pgp"
)

// recipients are the public identifiers of a file's keys, by key type
// ("age", "pgp", "kms", …).
func recipients(md sops.Metadata) map[string][]string {
	out := map[string][]string{}
	for _, g := range md.KeyGroups {
		for _, k := range g {
			t := k.TypeToIdentifier()
			if !slices.Contains(out[t], k.ToString()) {
				out[t] = append(out[t], k.ToString())
			}
		}
	}
	return out
}

// ageFound is what the environment offers as age keys, as the sops CLI
// reads them: the recipients of the identities it could parse, and what
// is wrong with the places it could not.
type ageFound struct {
	recipients []string
	problems   []string
}

// ageKeysHere reads the age identities of the places the sops CLI reads
// (SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, the user's keys.txt), to tell a
// missing key from a malformed one and from a key for another recipient.
// SOPS_AGE_KEY_CMD is not run again; SSH keys are not parsed (they need a
// passphrase prompt the sops CLI may show).
func ageKeysHere() ageFound {
	var f ageFound
	add := func(where, text string) {
		ids, err := age.ParseIdentities(strings.NewReader(text))
		if err != nil {
			// age's parse errors name a line, never key material.
			f.problems = append(f.problems, fmt.Sprintf("%s does not hold an age secret key (AGE-SECRET-KEY-1…): %v", where, err))
			return
		}
		for _, id := range ids {
			if x, ok := id.(*age.X25519Identity); ok {
				f.recipients = append(f.recipients, x.Recipient().String())
			}
		}
	}
	if v := os.Getenv(sopsage.SopsAgeKeyEnv); strings.TrimSpace(v) != "" {
		add(sopsage.SopsAgeKeyEnv, v)
	}
	if p := os.Getenv(sopsage.SopsAgeKeyFileEnv); p != "" {
		switch b, err := os.ReadFile(p); {
		case errors.Is(err, os.ErrNotExist):
			f.problems = append(f.problems, fmt.Sprintf("%s names %s, which does not exist", sopsage.SopsAgeKeyFileEnv, p))
		case err != nil:
			f.problems = append(f.problems, fmt.Sprintf("%s names %s, which cannot be read: %v", sopsage.SopsAgeKeyFileEnv, p, err))
		default:
			add(sopsage.SopsAgeKeyFileEnv+" ("+p+")", string(b))
		}
	}
	if p := userKeysFile(); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			add(p, string(b))
		}
	}
	if v, ok := os.LookupEnv(sopsage.SopsAgeKeyCmdEnv); ok && strings.TrimSpace(v) == "" {
		f.problems = append(f.problems, sopsage.SopsAgeKeyCmdEnv+" is set but empty: unset it or give the command that prints the age key")
	}
	return f
}

func userKeysFile() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		var err error
		if dir, err = os.UserConfigDir(); err != nil {
			return ""
		}
	}
	return filepath.Join(dir, sopsage.SopsAgeKeyUserConfigPath)
}

// keyTrouble says why no key opened a file, the way the sops CLI would
// tell it apart (no key found, a key for another recipient, a malformed
// key, a key type nothing here provides), and the next step for the key
// types the file accepts. Keys handed over in memory (the Action's and
// Dagger's age key) are judged instead of the environment's age keys.
func keyTrouble(md sops.Metadata, keys Keys) (cause, hint string) {
	rs := recipients(md)
	var causes, hints []string
	if ages := rs[sopsage.KeyTypeIdentifier]; len(ages) > 0 {
		var found ageFound
		where := "here"
		if len(keys.AgeIdentities) > 0 {
			where = "handed to this run"
			var ids sopsage.ParsedIdentities
			if err := ids.Import(keys.AgeIdentities...); err != nil {
				found.problems = append(found.problems, "the age key given is not an age secret key (AGE-SECRET-KEY-1…)")
			}
			for _, id := range ids {
				if x, ok := id.(*age.X25519Identity); ok {
					found.recipients = append(found.recipients, x.Recipient().String())
				}
			}
		} else {
			found = ageKeysHere()
		}
		switch {
		case len(found.problems) > 0:
			causes = append(causes, found.problems...)
		case len(found.recipients) == 0:
			causes = append(causes, "no age key was found "+where)
		case groupsOpened(md, found.recipients) > 0:
			need := md.ShamirThreshold
			if need == 0 {
				need = len(md.KeyGroups)
			}
			causes = append(causes, fmt.Sprintf("the age key(s) %s open %d of the file's %d key groups, and it needs %d", where, groupsOpened(md, found.recipients), len(md.KeyGroups), need))
		default:
			causes = append(causes, fmt.Sprintf("the age key(s) %s are for %s, not one of the file's age recipients (%s)",
				where, strings.Join(found.recipients, ", "), strings.Join(ages, ", ")))
		}
		hints = append(hints, "give this run the age secret key of one of the file's age recipients: SOPS_AGE_KEY (CI: a secret; the Action's sops-age-key input; Dagger's --sops-age-key env://NAME), or SOPS_AGE_KEY_FILE naming a key file")
	}
	if fps := rs[pgp.KeyTypeIdentifier]; len(fps) > 0 {
		if len(keys.AgeIdentities) > 0 && len(rs) == 1 {
			causes = append(causes, "the file is encrypted to PGP keys only, and this run was handed an age key")
		} else {
			causes = append(causes, "no PGP secret key of "+strings.Join(fps, ", ")+" was available to gpg")
		}
		hints = append(hints, fmt.Sprintf("import the PGP secret key of %s with `gpg --import` into the keyring gpg uses here (%s)", strings.Join(fps, " or "), gnupgHome()))
	}
	for _, t := range slices.Sorted(maps.Keys(rs)) {
		if t == sopsage.KeyTypeIdentifier || t == pgp.KeyTypeIdentifier {
			continue
		}
		ids := rs[t]
		causes = append(causes, fmt.Sprintf("no %s key (%s) could be used", t, strings.Join(ids, ", ")))
		hints = append(hints, fmt.Sprintf("give this run the credentials the %s key needs (as the sops CLI reads them from the environment)", t))
	}
	return strings.Join(causes, "; "), strings.Join(hints, "; or ")
}

func gnupgHome() string {
	if h := os.Getenv("GNUPGHOME"); h != "" {
		return "GNUPGHOME=" + h
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".gnupg") + ", GNUPGHOME unset"
	}
	return "GNUPGHOME unset"
}

// groupsOpened counts the key groups with an age recipient among have.
func groupsOpened(md sops.Metadata, have []string) int {
	n := 0
	for _, g := range md.KeyGroups {
		for _, k := range g {
			if k.TypeToIdentifier() == sopsage.KeyTypeIdentifier && slices.Contains(have, k.ToString()) {
				n++
				break
			}
		}
	}
	return n
}
