package registry

import (
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// FuzzFilter checks that no policy and no tag list make a filter panic,
// that a filter reads back as written, that what a semver filter or no
// filter passes is a version (never latest), and that Newer and Rank are
// a consistent order.
func FuzzFilter(f *testing.F) {
	for _, s := range [][6]string{
		{"", "", "1.2.3", "latest", "1.2.4", "main-abc1234"},
		{"*", "numerical", "x", "build-9", "build-10", "latest"},
		{"semver:major", "", "1.4.5", "20260101", "3050", "2.0.0"},
		{"semver:minor", "", "v1.2.3", "v1.3.0", "1.3.0", "v1.3.0-rc.1"},
		{"semver:patch", "", "1.2", "1.2.9", "1.3", "1.2.10-beta.2"},
		{"semver:~1.2", "", "1.2.3", "1.2.9", "1.3.0", "1.2.10-rc.1"},
		{`semver:>=1.0 <2.0`, "", "1.2.3", "1.0.0-0", "1.0.0-a.1", "1.0.0-a"},
		{"glob:main-*", "alphabetical", "main-abc1234", "main-b", "main-", "latest"},
		{`regex:^build-(\d+)$`, "numerical", "build-9", "build-10", "build-99999999999999999999", "build-2"},
		{"regexp:(a|b)+", "time", "ab", "ba", "", "ccc"},
		{"glob:[", "", "x", "[", "]", "*"},
		{"", "", "1.25.3-alpine3.18", "1.25.4-alpine3.19", "1.25.4", "1.25.4-alpine"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, filter, order, current, a, b, c string) {
		o, err := ParseOrder(order)
		if err != nil {
			o = ByTime
		}
		flt, err := ParseFilter(filter, o)
		if err != nil {
			return
		}
		again, err := ParseFilter(flt.String(), o)
		if err != nil || again.String() != flt.String() {
			t.Fatalf("filter %q reads as %q, which reads as %q (%v)", filter, flt, again, err)
		}
		flt.Prerelease = strings.Contains(a, "pre")
		bound, err := flt.Bind(current)
		if err != nil {
			return
		}
		tags := []string{a, b, c, current}
		var pass []string
		for _, tag := range tags {
			if !bound.Match(tag) {
				continue
			}
			pass = append(pass, tag)
			switch bound.Kind {
			case "semver":
				if _, err := semver.NewVersion(tag); err != nil {
					t.Errorf("%s on %q passes %q, which is no version: %v", bound, current, tag, err)
				}
			case "":
				if _, err := semver.NewVersion(tag); err != nil || strings.EqualFold(tag, "latest") {
					t.Errorf("no filter on %q passes %q, which is no version", current, tag)
				}
			}
		}
		// Newer is a strict order: irreflexive, asymmetric, transitive.
		for _, x := range tags {
			if bound.Newer(x, x) {
				t.Errorf("%s: %q is newer than itself", bound, x)
			}
			for _, y := range tags {
				if bound.Newer(x, y) && bound.Newer(y, x) {
					t.Errorf("%s: %q and %q are each newer than the other", bound, x, y)
				}
				for _, z := range tags {
					if bound.Newer(x, y) && bound.Newer(y, z) && !bound.Newer(x, z) {
						t.Errorf("%s: %q > %q > %q but not %q > %q", bound, x, y, z, x, z)
					}
				}
			}
		}
		ranked := slices.Clone(pass)
		bound.Rank(ranked)
		if !slices.Equal(slices.Sorted(slices.Values(ranked)), slices.Sorted(slices.Values(pass))) {
			t.Fatalf("%s: Rank(%q) = %q, not a permutation", bound, pass, ranked)
		}
		for i := range ranked {
			for j := i + 1; j < len(ranked); j++ {
				if bound.Newer(ranked[j], ranked[i]) {
					t.Errorf("%s: Rank put %q before the newer %q: %q", bound, ranked[i], ranked[j], ranked)
				}
			}
		}
	})
}
