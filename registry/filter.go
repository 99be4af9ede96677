package registry

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Order is how a policy ranks the tags that pass its filter.
type Order string

// The orders. Semver filters always order by version; glob and regex
// filters (and no filter) order by build time unless the policy says
// otherwise.
const (
	ByTime         Order = "time"
	BySemver       Order = "semver"
	ByAlphabetical Order = "alphabetical"
	ByNumerical    Order = "numerical"
)

// ParseOrder parses a policy's order; "" is ByTime.
func ParseOrder(s string) (Order, error) {
	switch o := Order(strings.ToLower(strings.TrimSpace(s))); o {
	case "", ByTime:
		return ByTime, nil
	case ByAlphabetical, ByNumerical:
		return o, nil
	}
	return "", fmt.Errorf("unknown tag order %q: use time, alphabetical or numerical", s)
}

// Filter is a tag filter as written in a policy:
//
//	glob:PATTERN     path.Match syntax, e.g. glob:main-*
//	regex:PATTERN    Go regular expression, anchored as written
//	semver:RANGE     a Masterminds range such as ~1.2 or ">=1.0 <2.0"
//	semver:patch     newer within the running version's minor
//	semver:minor     newer within the running version's major
//	semver:major     any newer version
//
// The empty filter and "*" pass every tag. Semver filters pass only tags
// that parse as versions and leave pre-releases out unless the range names
// one (Masterminds' rule: ">=1.3.0-0" admits 1.3.0-rc.1).
type Filter struct {
	Kind    string // "", "glob", "regex" or "semver"
	Pattern string
	// Order ranks the passing tags; BySemver for semver filters.
	Order Order
	// Prerelease lets a semver filter pass pre-releases (1.3.0-rc.1) whose
	// release version the range admits.
	Prerelease bool

	re         *regexp.Regexp
	constraint *semver.Constraints
	level      string // "patch", "minor" or "major" until bound
}

// ParseFilter parses a filter, reporting what is wrong with it in terms
// of the policy syntax. order applies to glob and regex filters.
func ParseFilter(s string, order Order) (Filter, error) {
	s = strings.TrimSpace(s)
	if order == "" {
		order = ByTime
	}
	if s == "" || s == "*" {
		return Filter{Order: order}, nil
	}
	kind, pattern, ok := strings.Cut(s, ":")
	if !ok || pattern == "" {
		return Filter{}, fmt.Errorf("tag filter %q has no kind: write glob:PATTERN, regex:PATTERN or semver:RANGE", s)
	}
	f := Filter{Kind: kind, Pattern: pattern, Order: order}
	switch kind {
	case "glob":
		if _, err := path.Match(pattern, ""); err != nil {
			return Filter{}, fmt.Errorf("tag filter %q: bad glob pattern: %v", s, err)
		}
	case "regex", "regexp":
		re, err := regexp.Compile(pattern)
		if err != nil {
			return Filter{}, fmt.Errorf("tag filter %q: bad regular expression: %v", s, err)
		}
		f.Kind, f.re = "regex", re
	case "semver":
		f.Order = BySemver
		switch pattern {
		case "patch", "minor", "major":
			f.level = pattern
		default:
			c, err := semver.NewConstraint(pattern)
			if err != nil {
				return Filter{}, fmt.Errorf("tag filter %q: bad semver range: %v; examples: semver:~1.2, semver:\">=1.0 <2.0\", semver:minor", s, err)
			}
			f.constraint = c
		}
	default:
		return Filter{}, fmt.Errorf("tag filter %q: unknown kind %q: use glob, regex or semver", s, kind)
	}
	return f, nil
}

// String is the filter as written in a policy.
func (f Filter) String() string {
	if f.Kind == "" {
		return "*"
	}
	return f.Kind + ":" + f.Pattern
}

// Bind fixes a semver level (patch, minor, major) to the running tag:
// semver:minor on 1.2.3 passes versions >= 1.2.3 and < 2.0.0. Other
// filters are returned as they are.
func (f Filter) Bind(current string) (Filter, error) {
	if f.level == "" {
		return f, nil
	}
	v, err := semver.NewVersion(current)
	if err != nil {
		return Filter{}, fmt.Errorf("tag filter %s needs the running tag to be a version, but it is %q; use a semver range instead, e.g. semver:>=1.0", f, current)
	}
	base := fmt.Sprintf(">=%s", v.Original())
	var r string
	switch f.level {
	case "patch":
		r = fmt.Sprintf("%s, <%d.%d.0", base, v.Major(), v.Minor()+1)
	case "minor":
		r = fmt.Sprintf("%s, <%d.0.0", base, v.Major()+1)
	default:
		r = base
	}
	c, err := semver.NewConstraint(r)
	if err != nil {
		return Filter{}, fmt.Errorf("tag filter %s on %q: %v", f, current, err)
	}
	f.constraint, f.level = c, ""
	return f, nil
}

// Match reports whether a tag passes the filter. A semver level that was
// not bound passes nothing.
func (f Filter) Match(tag string) bool {
	switch f.Kind {
	case "":
		return true
	case "glob":
		ok, _ := path.Match(f.Pattern, tag)
		return ok
	case "regex":
		return f.re.MatchString(tag)
	case "semver":
		if f.constraint == nil {
			return false
		}
		v, err := semver.NewVersion(tag)
		if err != nil {
			return false
		}
		if f.Prerelease && v.Prerelease() != "" {
			r, err := v.SetPrerelease("")
			if err != nil {
				return false
			}
			v = &r
		}
		return f.constraint.Check(v)
	}
	return false
}

// NeedsMetadata reports whether ranking needs each tag's creation time;
// the other orders rank from the tag list alone, with no request per tag.
func (f Filter) NeedsMetadata() bool { return f.Order == ByTime }

// Rank sorts tags that passed the filter best first, for the orders that
// need no metadata: highest version, last name, or biggest number. Tags
// that cannot be ranked (no number under ByNumerical) go last.
func (f Filter) Rank(tags []string) {
	switch f.Order {
	case BySemver:
		sort.SliceStable(tags, func(i, j int) bool { return f.Newer(tags[i], tags[j]) })
	case ByNumerical:
		sort.SliceStable(tags, func(i, j int) bool { return f.Newer(tags[i], tags[j]) })
	default:
		sort.SliceStable(tags, func(i, j int) bool { return tags[i] > tags[j] })
	}
}

// Newer reports whether tag a ranks above tag b under the filter's order
// (for ByTime, which needs metadata, it falls back to names).
func (f Filter) Newer(a, b string) bool {
	switch f.Order {
	case BySemver:
		va, ea := semver.NewVersion(a)
		vb, eb := semver.NewVersion(b)
		switch {
		case ea != nil || eb != nil:
			return ea == nil && eb != nil
		case !va.Equal(vb):
			return va.GreaterThan(vb)
		}
		return a > b
	case ByNumerical:
		na, oka := f.number(a)
		nb, okb := f.number(b)
		switch {
		case !oka || !okb:
			return oka && !okb
		case na != nb:
			return na > nb
		}
		return a > b
	}
	return a > b
}

var digits = regexp.MustCompile(`\d+`)

// number is the regex's first capture group, or the tag's last run of
// digits.
func (f Filter) number(tag string) (uint64, bool) {
	s := ""
	if f.re != nil && f.re.NumSubexp() > 0 {
		if m := f.re.FindStringSubmatch(tag); len(m) > 1 {
			s = m[1]
		}
	}
	if s == "" {
		all := digits.FindAllString(tag, -1)
		if len(all) == 0 {
			return 0, false
		}
		s = all[len(all)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
