package verify

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that no config makes Parse panic, that a config is
// either accepted or refused with at least one problem (each with a line
// inside the document, or none), and that an accepted config keeps the
// promises Required relies on: every profile named and signing, every rule
// naming a defined profile.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		issueConfig,
		"",
		"profiles: []\n",
		"profiles:\n- name: a\n  keys: [a.pub]\nrepositories:\n- match: '*'\n  profile: a\n",
		"profiles:\n- name: ci\n  trustedRoot: r.json\n  keyless:\n  - issuerRegexp: ^https://.*$\n    subject: me@example.com\n",
		"profiles:\n- name: ci\n  trustedRoot: r.json\n  tlog: ignore\n  keyless:\n  - issuer: https://i\n    subjectRegexp: ^me@.*$\n",
		"profiles:\n- &p\n  name: a\n  keys: [a.pub]\n- *p\n",
		"profiles: {name: a}\n",
		"repositories:\n- match: ghcr.io/[\n  profile: b\n",
		"profiles:\n- name: a\n  keys: [a.pub, a.pub]\n  keys: []\n",
		"profiles:\n- name: a\n  keySecrets: [fluxd/cosign-keys, x/y/z, Bad/n]\n",
		"a: &a [*a, *a]\n",
		"profiles:\n- name: !!binary aGVsbG8=\n  keys: [!!int 3]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse([]byte(s))
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("refused without a problem: %v", err)
			}
			// YAML breaks lines at \r too.
			lines := strings.Count(s, "\n") + strings.Count(s, "\r") + 1
			for _, p := range ce.Problems {
				if p.Line < 0 || p.Line > lines {
					t.Fatalf("problem at line %d of a %d-line config: %s", p.Line, lines, p)
				}
			}
			return
		}
		for _, p := range c.Profiles {
			if !profileName.MatchString(p.Name) || len(p.Keys)+len(p.KeySecrets)+len(p.Keyless) == 0 {
				t.Fatalf("accepted a profile without a name or a signer: %+v", p)
			}
			if _, ok := c.Profile(p.Name); !ok {
				t.Fatalf("profile %q not found by name", p.Name)
			}
		}
		for _, r := range c.Repositories {
			if _, ok := c.Profile(r.Profile); !ok {
				t.Fatalf("accepted a rule naming no profile: %+v", r)
			}
			if _, err := c.Required(nil, "app", "ghcr.io/org/app"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
