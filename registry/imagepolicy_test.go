package registry

import (
	"strings"
	"testing"
)

// latest picks as image-reflector-controller does: the best tag f
// passes, "" when none does.
func latest(f Filter, tags []string) string {
	var pass []string
	for _, t := range tags {
		if f.Match(t) {
			pass = append(pass, t)
		}
	}
	if len(pass) == 0 {
		return ""
	}
	f.Rank(pass)
	return pass[0]
}

// Each case is named after the Flux v2 rule (image-reflector-controller's
// ImagePolicy documentation) it checks.
func TestImagePolicyFilter(t *testing.T) {
	t.Parallel()
	ubuntu := []string{"bionic", "focal", "jammy", "noble", "xenial-20210114", "latest"}
	cases := []struct {
		name string
		p    ImagePolicy
		tags []string
		want string
	}{
		{"semver picks the highest version in the range",
			ImagePolicy{SemverRange: ">=1.0.0"}, []string{"0.9.0", "1.0.0", "1.2.0", "1.10.0", "latest"}, "1.10.0"},
		{"semver range bounds the versions",
			ImagePolicy{SemverRange: "~1.2"}, []string{"1.2.0", "1.2.7", "1.3.0", "2.0.0"}, "1.2.7"},
		{"semver leaves pre-releases out unless the range names one",
			ImagePolicy{SemverRange: ">=1.0.0"}, []string{"1.0.0", "1.1.0-rc.1"}, "1.0.0"},
		{"semver range with a pre-release admits pre-releases",
			ImagePolicy{SemverRange: ">=1.0.0-0"}, []string{"1.0.0", "1.1.0-rc.1"}, "1.1.0-rc.1"},
		{"semver reads versions written loosely (v prefix, fewer numbers)",
			ImagePolicy{SemverRange: ">=1.0.0"}, []string{"v1.2", "1.1.9", "v1"}, "v1.2"},
		{"semver with filterTags ranks the extracted version",
			ImagePolicy{SemverRange: ">=1.0.0", Pattern: `^v(?P<version>[0-9.]+)-alpine$`, Extract: "$version"}, []string{"v1.2.0-alpine", "v1.3.0-alpine", "v1.9.0", "v1.2.0"}, "v1.3.0-alpine"},
		{"alphabetical without filterTags ranks every tag (Ubuntu code names)",
			ImagePolicy{Alphabetical: true}, ubuntu, "xenial-20210114"},
		{"alphabetical desc picks the first in order",
			ImagePolicy{Alphabetical: true, Desc: true}, ubuntu, "bionic"},
		{"alphabetical ranks RFC 3339 stamps in time order",
			ImagePolicy{Alphabetical: true}, []string{"2025-12-31T23:59:59Z", "2026-01-02T00:00:00Z", "2026-01-01T12:00:00Z"}, "2026-01-02T00:00:00Z"},
		{"alphabetical with filterTags and extract ranks the extracted stamp",
			ImagePolicy{Alphabetical: true, Pattern: `^RELEASE\.(?P<timestamp>.*)Z$`, Extract: "$timestamp"}, []string{"RELEASE.2026-01-31T08-42-01Z", "RELEASE.2026-02-01T00-00-00Z", "latest", "zzz"}, "RELEASE.2026-02-01T00-00-00Z"},
		{"alphabetical without filterTags ranks latest among the others",
			ImagePolicy{Alphabetical: true}, []string{"1.0.0", "latest", "2.0.0"}, "latest"},
		{"numerical compares numbers, not strings",
			ImagePolicy{Numerical: true}, []string{"9", "10", "100", "11"}, "100"},
		{"numerical desc picks the lowest number",
			ImagePolicy{Numerical: true, Desc: true}, []string{"9", "10", "100", "11"}, "9"},
		{"numerical reads decimals as numbers",
			ImagePolicy{Numerical: true}, []string{"1.5", "1.10", "1.45"}, "1.5"},
		{"numerical with filterTags ranks the extracted build number",
			ImagePolicy{Numerical: true, Pattern: `^main-[a-f0-9]+-(?P<ts>[0-9]+)$`, Extract: "$ts"}, []string{"main-abc123-1700000000", "main-def456-1700000100", "main-0a0a0a-900000000", "feature-x-1800000000"}, "main-def456-1700000100"},
		{"numerical leaves out a value that is not a number",
			ImagePolicy{Numerical: true}, []string{"latest", "3", "2"}, "3"},
		{"filterTags without extract ranks the whole tag",
			ImagePolicy{Alphabetical: true, Pattern: `^prod-`}, []string{"prod-a", "prod-b", "staging-z"}, "prod-b"},
		{"cosign signature tags are excluded by default",
			ImagePolicy{Alphabetical: true}, []string{"1.0.0", "sha256-abc.sig", "1.1.0"}, "1.1.0"},
		{"exclusionList replaces the default",
			ImagePolicy{Alphabetical: true, Exclude: []string{"^latest$"}}, []string{"1.0.0", "latest", "sha256-abc.sig"}, "sha256-abc.sig"},
		{"an empty exclusionList excludes nothing",
			ImagePolicy{Alphabetical: true, Exclude: []string{}}, []string{"1.0.0", "sha256-abc.sig"}, "sha256-abc.sig"},
		{"filterTags matching nothing leaves no candidate",
			ImagePolicy{Alphabetical: true, Pattern: `^nope$`}, []string{"a", "b"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, err := ImagePolicyFilter(c.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := latest(f, c.tags); got != c.want {
				t.Errorf("picked %q, want %q (filter %s)", got, c.want, f)
			}
			// Not bound to the running tag, as Flux v2 ranks regardless
			// of what runs.
			if b, err := f.Bind("0.0.1"); err != nil || latest(b, c.tags) != c.want {
				t.Errorf("bound to a running tag, it picks %q (%v)", latest(b, c.tags), err)
			}
			if f.NeedsMetadata() {
				t.Error("an ImagePolicy ranks from the tag list; it must not need image metadata")
			}
		})
	}
}

func TestImagePolicyFilterRefusesBadPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		p    ImagePolicy
		want string
	}{
		{"no policy", ImagePolicy{}, "exactly one"},
		{"two policies", ImagePolicy{Alphabetical: true, Numerical: true}, "exactly one"},
		{"bad range", ImagePolicy{SemverRange: "one or two"}, "not a semver range"},
		{"bad pattern", ImagePolicy{Alphabetical: true, Pattern: "("}, "not a Go regular expression"},
		{"extract without pattern", ImagePolicy{Alphabetical: true, Extract: "$ts"}, "needs a pattern"},
		{"bad exclusion", ImagePolicy{Alphabetical: true, Exclude: []string{"("}}, "exclusionList"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := ImagePolicyFilter(c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func TestImagePolicyFilterKeysDiffer(t *testing.T) {
	t.Parallel()
	a, _ := ImagePolicyFilter(ImagePolicy{Alphabetical: true})
	d, _ := ImagePolicyFilter(ImagePolicy{Alphabetical: true, Desc: true})
	x, _ := ImagePolicyFilter(ImagePolicy{Alphabetical: true, Pattern: "^a", Extract: "$0"})
	if a.Key() == d.Key() || a.Key() == x.Key() || a.Key() == EveryTag.Key() {
		t.Fatalf("filters that pick differently share a cache key: %q %q %q %q", a.Key(), d.Key(), x.Key(), EveryTag.Key())
	}
}
