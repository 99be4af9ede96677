package verify

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var cmpRegexp = cmp.Comparer(func(a, b *regexp.Regexp) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.String() == b.String()
})

// issueConfig is the minimal shape issue 33 is judged by, with a
// repositories rule.
const issueConfig = `# --verify-config FILE
profiles:
- name: signed
  keys: [/etc/fluxd/cosign.pub]          # cosign public keys (PEM)
- name: ci
  keyless:
  - issuer: https://token.actions.githubusercontent.com
    subjectRegexp: ^https://github.com/org/.*$
  trustedRoot: /etc/fluxd/trusted_root.json
  attestations: [https://spdx.dev/Document]
repositories:
- match: ghcr.io/org/*
  profile: signed
`

func TestParseTheIssuesShape(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(issueConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Profiles: []Profile{
			{Name: "signed", Keys: []string{"/etc/fluxd/cosign.pub"}, Line: 3},
			{Name: "ci", Keyless: []Identity{{
				Issuer:        "https://token.actions.githubusercontent.com",
				SubjectRegexp: regexp.MustCompile(`^https://github.com/org/.*$`),
				Line:          7,
			}}, TrustedRoot: "/etc/fluxd/trusted_root.json", Tlog: TlogRequired, Attestations: []string{"https://spdx.dev/Document"}, Line: 5},
		},
		Repositories: []Rule{{Match: "ghcr.io/org/*", Profile: "signed", Line: 12}},
	}
	if d := cmp.Diff(want, c, cmpRegexp); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// tlog: is required unless the profile says ignore.
func TestParseTlog(t *testing.T) {
	t.Parallel()
	for config, want := range map[string]TlogMode{
		"": TlogRequired, "  tlog: required\n": TlogRequired, "  tlog: ignore\n": TlogIgnore,
	} {
		c, err := Parse([]byte("profiles:\n- name: ci\n  trustedRoot: r.json\n" + config + "  keyless:\n  - issuer: https://i\n    subject: me\n"))
		if err != nil {
			t.Fatalf("%q: %v", config, err)
		}
		if got := c.Profiles[0].Tlog; got != want {
			t.Errorf("%q: tlog %q, want %q", config, got, want)
		}
	}
}

func TestParseEmptyIsNoRequirement(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "\n# nothing yet\n", "---\n", "profiles: []\n", "profiles:\nrepositories:\n"} {
		c, err := Parse([]byte(s))
		if err != nil || len(c.Profiles)+len(c.Repositories) != 0 {
			t.Errorf("Parse(%q) = %+v, %v; want an empty config", s, c, err)
		}
	}
}

// A bad config is refused with the line of each problem, every problem at
// once.
func TestParseRefusesWithTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config string
		want   []string // "line N: substring"
	}{
		{"not YAML", "profiles: [\n", []string{"not YAML"}},
		{"a list at the top", "- name: x\n", []string{"line 1: the config should be a mapping"}},
		{"unknown top field", "profile:\n- name: x\n", []string{`line 1: the config: unknown field "profile" (known: profiles, repositories)`}},
		{"unknown profile field, a typo", "profiles:\n- name: a\n  key: [a.pub]\n", []string{
			`line 3: a profile: unknown field "key"`, `line 2: profile "a" names no signer`}},
		{"no name", "profiles:\n- keys: [a.pub]\n", []string{"line 2: a profile has no name"}},
		{"bad name", "profiles:\n- name: Signed Images\n  keys: [a.pub]\n", []string{`line 2: profile name "Signed Images"`}},
		{"twice", "profiles:\n- name: a\n  keys: [a.pub]\n- name: a\n  keys: [b.pub]\n", []string{`line 4: profile "a" is defined twice (first at line 2)`}},
		{"keys not a list", "profiles:\n- name: a\n  keys: a.pub\n", []string{`line 3: keys should be a list, not "a.pub"`, "line 2: profile \"a\" names no signer"}},
		{"empty key", "profiles:\n- name: a\n  keys: ['', b.pub]\n", []string{"line 3: keys is empty"}},
		{"key twice", "profiles:\n- name: a\n  keys: [b.pub, b.pub]\n", []string{`line 3: keys: "b.pub" is written twice`}},
		{"keyless without a trusted root", "profiles:\n- name: ci\n  keyless:\n  - issuer: https://i\n    subject: me@example.com\n", []string{
			`line 2: profile "ci" has keyless identities but no trustedRoot`}},
		{"trusted root without keyless", "profiles:\n- name: a\n  keys: [a.pub]\n  trustedRoot: r.json\n", []string{
			`line 2: profile "a" names a trustedRoot but no keyless identity`}},
		{"identity without an issuer", "profiles:\n- name: ci\n  trustedRoot: r.json\n  keyless:\n  - subject: me@example.com\n", []string{
			"line 5: a keyless identity needs exactly one of issuer and issuerRegexp"}},
		{"identity with both subjects", "profiles:\n- name: ci\n  trustedRoot: r.json\n  keyless:\n  - issuer: https://i\n    subject: a\n    subjectRegexp: ^a$\n", []string{
			"line 5: a keyless identity needs exactly one of subject and subjectRegexp"}},
		{"unanchored regexp", "profiles:\n- name: ci\n  trustedRoot: r.json\n  keyless:\n  - issuer: https://i\n    subjectRegexp: https://github.com/org/.*\n", []string{
			`line 6: subjectRegexp "https://github.com/org/.*" is not anchored`}},
		{"bad regexp", "profiles:\n- name: ci\n  trustedRoot: r.json\n  keyless:\n  - issuerRegexp: ^(a$\n    subject: me\n", []string{
			`line 5: issuerRegexp "^(a$" is not a regular expression`}},
		{"tlog not a setting", "profiles:\n- name: ci\n  trustedRoot: r.json\n  tlog: off\n  keyless:\n  - issuer: https://i\n    subject: me\n", []string{
			`line 4: tlog "off": write required`}},
		{"tlog without keyless", "profiles:\n- name: a\n  keys: [a.pub]\n  tlog: ignore\n", []string{
			`line 2: profile "a" sets tlog but names no keyless identity`}},
		{"rule names no profile", "profiles:\n- name: a\n  keys: [a.pub]\nrepositories:\n- match: ghcr.io/org/*\n  profile: b\n", []string{
			`line 5: repositories "ghcr.io/org/*": no profile is named "b" (profiles: a)`}},
		{"rule with a bad glob", "repositories:\n- match: ghcr.io/[\n  profile: b\n", []string{
			`line 2: match "ghcr.io/[" is not a glob`, `line 2: repositories "ghcr.io/[": no profile is named "b" (profiles: none)`}},
		{"field twice", "profiles:\n- name: a\n  keys: [a.pub]\n  keys: [b.pub]\n", []string{"line 4: a profile: keys is written twice"}},
		{"alias", "profiles:\n- &p\n  name: a\n  keys: [a.pub]\n- *p\n", []string{"line 5: a profile should be a mapping (key: value), not an alias"}},
		{"two documents", "profiles:\n- name: a\n  keys: [a.pub]\n---\nrepositories:\n- match: '*'\n  profile: a\n", []string{
			"line 4: a second YAML document (after ---)"}},
		{"too big", "#" + strings.Repeat("x", MaxConfigSize), []string{"more than 1048576"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tc.config))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse = %+v, %v; want a *ConfigError", c, err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem says %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
		})
	}
}
