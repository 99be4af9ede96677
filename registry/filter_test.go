package registry

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func pick(t *testing.T, filter string, order Order, current string, tags []string) string {
	t.Helper()
	f, err := ParseFilter(filter, order)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = f.Bind(current); err != nil {
		t.Fatal(err)
	}
	var pass []string
	for _, tag := range tags {
		if f.Match(tag) {
			pass = append(pass, tag)
		}
	}
	if len(pass) == 0 {
		return ""
	}
	f.Rank(pass)
	return pass[0]
}

func TestFilterPicks(t *testing.T) {
	versions := []string{"1.2.3", "1.2.9", "1.3.0", "2.0.0", "1.2.10-rc.1", "2.1.0-beta", "latest", "main-abc1234"}
	for _, tc := range []struct {
		filter  string
		order   Order
		current string
		want    string
	}{
		{"semver:~1.2", "", "1.2.3", "1.2.9"},
		{"semver:>=1.0 <2.0", "", "1.2.3", "1.3.0"},
		{"semver:patch", "", "1.2.3", "1.2.9"},
		{"semver:minor", "", "1.2.3", "1.3.0"},
		{"semver:major", "", "1.2.3", "2.0.0"},
		{"semver:>=1.2.10-0 <1.3", "", "1.2.3", "1.2.10-rc.1"},
		{"semver:>=3", "", "1.2.3", ""},
		{"glob:main-*", ByAlphabetical, "main-abc1234", "main-abc1234"},
		{"regex:^build-(\\d+)$", ByNumerical, "build-9", "build-10"},
		{"glob:build-*", ByAlphabetical, "build-9", "build-9"},
		// No filter passes versions only: none of build-N, nor latest.
		{"*", ByNumerical, "x", ""},
		{"glob:*", ByNumerical, "x", "build-10"},
	} {
		tags := versions
		if strings.Contains(tc.filter, "build") || tc.filter == "*" || tc.filter == "glob:*" {
			tags = []string{"build-9", "build-10", "build-2", "latest"}
		}
		if got := pick(t, tc.filter, tc.order, tc.current, tags); got != tc.want {
			t.Errorf("%s (%s) from %s: picked %q, want %q", tc.filter, tc.order, tc.current, got, tc.want)
		}
	}
}

func TestFilterErrors(t *testing.T) {
	for _, tc := range []struct{ filter, want string }{
		{"semver:>>1.q", "bad semver range"},
		{"regex:(", "bad regular expression"},
		{"glob:[", "bad glob pattern"},
		{"sem:1.2", `unknown kind "sem"`},
		{"main-*", "has no kind"},
	} {
		_, err := ParseFilter(tc.filter, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to say %q", tc.filter, err, tc.want)
		}
	}
	f, _ := ParseFilter("semver:minor", "")
	if _, err := f.Bind("latest"); err == nil || !strings.Contains(err.Error(), `running tag to be a version, but it is "latest"`) {
		t.Errorf("binding semver:minor to latest: %v", err)
	}
	if _, err := ParseOrder("random"); err == nil {
		t.Error("order random was accepted")
	}
}

func TestFilterMetadataNeeds(t *testing.T) {
	for s, want := range map[string]bool{"semver:~1": false, "glob:x-*": true, "": true} {
		f, _ := ParseFilter(s, "")
		if f.NeedsMetadata() != want {
			t.Errorf("%q: NeedsMetadata %v", s, !want)
		}
	}
	f, _ := ParseFilter("glob:x-*", ByNumerical)
	if f.NeedsMetadata() {
		t.Error("numerical order should need no metadata")
	}
	tags := []string{"1.0.0", "1.10.0", "1.9.0", "junk"}
	s, _ := ParseFilter("semver:>=0", "")
	s.Rank(tags)
	if !slices.Equal(tags, []string{"1.10.0", "1.9.0", "1.0.0", "junk"}) {
		t.Errorf("semver rank: %v", tags)
	}
}

func TestPrereleaseFlag(t *testing.T) {
	tags := []string{"1.2.3", "1.2.9", "1.3.0-rc.1", "1.2.10-beta.2", "2.0.0-rc.1"}
	for _, tc := range []struct {
		filter string
		pre    bool
		want   string
	}{
		{"semver:minor", false, "1.2.9"},
		{"semver:minor", true, "1.3.0-rc.1"},
		{"semver:patch", true, "1.2.10-beta.2"},
		{"semver:~1.2", true, "1.2.10-beta.2"},
		{"semver:major", true, "2.0.0-rc.1"},
	} {
		f, err := ParseFilter(tc.filter, "")
		if err != nil {
			t.Fatal(err)
		}
		f.Prerelease = tc.pre
		if f, err = f.Bind("1.2.3"); err != nil {
			t.Fatal(err)
		}
		var pass []string
		for _, tag := range tags {
			if f.Match(tag) {
				pass = append(pass, tag)
			}
		}
		f.Rank(pass)
		if len(pass) == 0 || pass[0] != tc.want {
			t.Errorf("%s prerelease=%v: %v, want %s first", tc.filter, tc.pre, pass, tc.want)
		}
	}
}

// passing is the tags f passes once bound to current, in the order given.
func passing(t *testing.T, filter, current string, tags []string) []string {
	t.Helper()
	f, err := ParseFilter(filter, "")
	if err != nil {
		t.Fatal(err)
	}
	if f, err = f.Bind(current); err != nil {
		t.Fatal(err)
	}
	var pass []string
	for _, tag := range tags {
		if f.Match(tag) {
			pass = append(pass, tag)
		}
	}
	return pass
}

// The issue "[safety] 5. No surprising tag choices": with no filter,
// latest (built with 1.2.3) beat 1.2.3 by build time, and semver:major
// on 1.4.5 passed 20260101 and 3050.
func TestNoSurprisingTags(t *testing.T) {
	t.Parallel()
	tags := []string{"latest", "LATEST", "main", "main-abc1234", "sha-4f2a9c1", "1.2.3", "1.2.4", "1.3", "2", "v1.2.5",
		"1.2.5-rc.1", "1.2.5-alpine", "1.25.4-alpine3.19", "20260101", "3050", "2.0.0", "1.2.3.4", "2024.01.15"}
	for _, tc := range []struct {
		filter, current string
		want            []string
	}{
		// CalVer written like the running version passes: the shape is
		// how a tag is written, not what it means.
		{"", "1.2.3", []string{"1.2.3", "1.2.4", "2.0.0", "2024.01.15"}},
		{"*", "1.2.3", []string{"1.2.3", "1.2.4", "2.0.0", "2024.01.15"}},
		{"", "v1.2.3", []string{"v1.2.5"}},
		{"", "1.2", []string{"1.3"}},
		{"", "1.2.3-alpine", []string{"1.2.5-alpine"}},
		{"", "1.25.3-alpine3.18", []string{"1.25.4-alpine3.19"}},
		{"", "1.2.5-rc.0", []string{"1.2.5-rc.1"}},
		{"", "20251231", []string{"2", "20260101", "3050"}},
		// Running a tag that is not a version, no filter guesses what
		// replaces it: a filter must say.
		{"", "latest", nil},
		{"", "main-abc1234", nil},
		{"", "1.2.3.4", nil},
		{"semver:major", "1.4.5", []string{"2.0.0", "2024.01.15"}},
		{"semver:major", "1.2.3", []string{"1.2.3", "1.2.4", "2.0.0", "2024.01.15"}},
		{"semver:major", "v1.2.3", []string{"v1.2.5"}},
		{"semver:minor", "1.2", []string{"1.3"}},
		{"semver:major", "2", []string{"2", "20260101", "3050"}},
		{"semver:patch", "1.2.3", []string{"1.2.3", "1.2.4"}},
		// Filters that name latest, or match it, may choose it.
		{"glob:latest", "1.2.3", []string{"latest"}},
		{"regex:^(?i)latest$", "1.2.3", []string{"latest", "LATEST"}},
		{"glob:main*", "main-abc1234", []string{"main", "main-abc1234"}},
	} {
		t.Run(tc.filter+" on "+tc.current, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, passing(t, tc.filter, tc.current, tags)); diff != "" {
				t.Errorf("passing tags (-want +got):\n%s", diff)
			}
		})
	}
}

// The case end to end: the default order is build time, which
// ranks by name without metadata; whatever the order, latest is never
// picked over the version it tags.
func TestNoFilterNeverPicksLatest(t *testing.T) {
	t.Parallel()
	for _, order := range []Order{ByTime, ByAlphabetical, ByNumerical} {
		if got := pick(t, "", order, "1.2.3", []string{"1.2.3", "latest"}); got != "1.2.3" {
			t.Errorf("no filter, order %s: picked %q, want 1.2.3", order, got)
		}
	}
}

func TestFilterKey(t *testing.T) {
	t.Parallel()
	keys := map[string]string{}
	for _, c := range []struct{ filter, current string }{{"", "1.2.3"}, {"", "v1.2.3"}, {"", "latest"}, {"semver:minor", "1.2.3"}, {"semver:minor", "2.0.0"}, {"glob:x-*", "1.2.3"}} {
		f, _ := ParseFilter(c.filter, "")
		f, err := f.Bind(c.current)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := keys[f.Key()]; ok {
			t.Errorf("%s on %s has the key %q of %s", c.filter, c.current, f.Key(), prev)
		}
		keys[f.Key()] = c.filter + " on " + c.current
	}
	// Two policies that differ only in pre-releases pass different
	// tags, so the plan's list cache must not share their lists.
	rel, _ := ParseFilter("semver:~1.2", "")
	pre := rel
	pre.Prerelease = true
	if rel.Key() == pre.Key() || rel.Match("1.2.4-rc.1") == pre.Match("1.2.4-rc.1") {
		t.Errorf("semver:~1.2 with and without pre-releases: keys %q and %q, matching 1.2.4-rc.1 %v and %v", rel.Key(), pre.Key(), rel.Match("1.2.4-rc.1"), pre.Match("1.2.4-rc.1"))
	}
	if EveryTag.Key() == (Filter{}).Key() || !EveryTag.Match("latest") {
		t.Errorf("EveryTag %q should pass latest and differ from no filter", EveryTag.Key())
	}
}

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
