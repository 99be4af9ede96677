package registry

import (
	"strings"
	"testing"
)

const digestHex = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

func TestCosignArtifact(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]bool{
		"sha256-" + digestHex + ".sig":                  true,
		"sha256-" + digestHex + ".att":                  true,
		"sha256-" + digestHex + ".sbom":                 true,
		"sha256-" + digestHex:                           true, // the referrers fallback tag
		"sha256-" + digestHex + ".cert":                 false,
		"sha256-" + digestHex + "x":                     false,
		"sha256-" + digestHex[:63] + ".sig":             false,
		"sha256-" + strings.ToUpper(digestHex) + ".sig": false, // digests are lower-case hex
		"sha256-" + digestHex[:63] + "g.sig":            false,
		"sha512-" + digestHex + ".sig":                  false,
		"1.2.3.sig":                                     false,
		"sha256-abc.sig":                                false,
		"1.2.3":                                         false,
		"latest":                                        false,
		"":                                              false,
	} {
		if got := CosignArtifact(tag); got != want {
			t.Errorf("CosignArtifact(%q) = %v, want %v", tag, got, want)
		}
	}
}

// TestNoFilterPassesCosignArtifacts checks the rule that cosign's own
// artifacts are never release candidates, whatever the filter: a glob or
// regex that matches every tag, EveryTag (a repository's newest image
// when a release names no tag), a Flux v2 ImagePolicy with an empty
// exclusion list. The releases beside them still pass.
func TestNoFilterPassesCosignArtifacts(t *testing.T) {
	t.Parallel()
	artifacts := []string{
		"sha256-" + digestHex + ".sig",
		"sha256-" + digestHex + ".att",
		"sha256-" + digestHex + ".sbom",
		"sha256-" + digestHex,
	}
	parsed := func(s string) Filter {
		f, err := ParseFilter(s, ByTime)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	flux := func(p ImagePolicy) Filter {
		f, err := ImagePolicyFilter(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name    string
		f       Filter
		release string // a tag the filter passes
	}{
		{"no filter", parsed(""), "1.2.3"},
		{"glob *", parsed("*"), "1.2.3"},
		{"glob:*", parsed("glob:*"), "latest"},
		{"glob:sha256-*", parsed("glob:sha256-*"), "sha256-abc"},
		{"regex:.*", parsed("regex:.*"), "latest"},
		{"regex:^sha256-", parsed("regex:^sha256-"), "sha256-abc"},
		{"regex:\\.sig$", parsed(`regex:\.sig$`), "1.2.3.sig"},
		{"EveryTag", EveryTag, "latest"},
		{"ImagePolicy alphabetical, empty exclusion list", flux(ImagePolicy{Alphabetical: true, Exclude: []string{}}), "latest"},
		{"ImagePolicy pattern .*, default exclusions", flux(ImagePolicy{Alphabetical: true, Pattern: ".*"}), "main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.f.Match(tc.release) {
				t.Errorf("%s should pass %q", tc.f, tc.release)
			}
			for _, tag := range artifacts {
				if tc.f.Match(tag) {
					t.Errorf("%s passes cosign's %q: a signature or attestation would be released", tc.f, tag)
				}
			}
			tags := append([]string{tc.release}, artifacts...)
			if got := latest(tc.f, tags); got != tc.release {
				t.Errorf("%s picks %q among %v, want %q", tc.f, got, tags, tc.release)
			}
		})
	}
}
