package registry

import (
	"slices"
	"strings"
	"testing"
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
		{"*", ByNumerical, "x", "build-10"},
	} {
		tags := versions
		if strings.Contains(tc.filter, "build") || tc.filter == "*" {
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
