package registry

import (
	"strings"
	"testing"
)

// With no filter, a running pre-release moves on as semver orders
// versions: to its own release (1.2.0 after 1.2.0-rc.1), or to a later
// pre-release written like it, never straight to a later release (2.0.1,
// CalVer): from its release on, the usual rules apply. A variant's suffix
// (alpine) is not a pre-release and keeps to its variant.
func TestNoFilterMovesAPreReleaseToItsRelease(t *testing.T) {
	for _, tc := range []struct {
		running string
		tags    []string
		best    string
		passes  []string
		not     []string
	}{
		{"1.2.0-rc.1", []string{"1.1.9", "1.2.0-rc.1", "1.2.0", "1.2.0-rc.2", "1.2.0-alpine", "v1.2.0", "latest"}, "1.2.0",
			[]string{"1.2.0", "1.2.0-rc.2"}, []string{"1.1.9", "1.2.0-alpine", "v1.2.0", "latest"}},
		{"1.2.0-rc.1", []string{"1.2.0-rc.1", "1.2.0-rc.2"}, "1.2.0-rc.2", []string{"1.2.0-rc.2"}, nil},
		{"2.0.0-beta2", []string{"2.0.0-beta2", "2.0.0", "2.0.1", "2.0.0-beta3", "2024.01.15"}, "2.0.0", []string{"2.0.0", "2.0.0-beta3"}, []string{"2.0.1", "2024.01.15"}},
		// A later pre-release ranks above an earlier release, as semver
		// orders them.
		{"1.2.0-rc.1", []string{"1.2.0", "1.3.0-rc.1"}, "1.3.0-rc.1", []string{"1.2.0", "1.3.0-rc.1"}, nil},
		{"1.25.3-alpine", []string{"1.25.3-alpine", "1.25.4", "1.25.4-alpine"}, "1.25.4-alpine", []string{"1.25.4-alpine"}, []string{"1.25.4"}},
	} {
		f, err := ParseFilter("", "")
		if err != nil {
			t.Fatal(err)
		}
		if f, err = f.Bind(tc.running); err != nil {
			t.Fatal(err)
		}
		for _, tag := range tc.passes {
			if !f.Match(tag) {
				t.Errorf("on %s, no filter refuses %s", tc.running, tag)
			}
		}
		for _, tag := range tc.not {
			if f.Match(tag) {
				t.Errorf("on %s, no filter passes %s", tc.running, tag)
			}
		}
		var pass []string
		for _, tag := range tc.tags {
			if f.Match(tag) {
				pass = append(pass, tag)
			}
		}
		if f.NeedsMetadata() {
			continue // ordered by build time: the registry's dates decide
		}
		f.Rank(pass)
		if len(pass) == 0 || pass[0] != tc.best || !f.Newer(pass[0], tc.running) {
			t.Errorf("on %s, no filter ranks %s; want %s first, newer than what runs", tc.running, strings.Join(pass, " "), tc.best)
		}
	}
}
