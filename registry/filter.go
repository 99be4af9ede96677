package registry

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

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
// No filter (the empty one, or "*") passes version tags only, never
// "latest", a branch name or a commit: once bound to a running version, the
// versions written like it (see Bind); otherwise any release version
// (1.2.3, v2, 20260101) with no suffix. A glob or regex passes what it
// matches, "latest" included when it matches: naming a tag in a filter is
// how a policy follows it. Semver filters pass only tags that parse as
// versions and leave pre-releases out unless the range names one
// (Masterminds' rule: ">=1.3.0-0" admits 1.3.0-rc.1).
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
	// bound is the running tag Bind fixed the filter to, if it matters.
	bound string
	// like, once bound, is the shape a tag must have to pass: all of it
	// with no filter, the v and the count of numbers under a semver level.
	like *shape
	// none, once bound, passes nothing: no filter on a running tag that
	// is not a version (latest, main-abc, 1.2.3.4) does not guess what
	// replaces it.
	none bool
	// flux is set for a filter made from a Flux v2 ImagePolicy
	// (ImagePolicyFilter): it matches and ranks as Flux v2 does.
	flux *fluxRank
}

// EveryTag passes every tag, "latest" and other non-versions included: it
// lists a repository, and is never a policy.
var EveryTag = Filter{Kind: "glob", Pattern: "*", Order: ByTime}

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
	if f.flux != nil {
		if f.Kind == "semver" {
			return strings.TrimSuffix("semver:"+f.Pattern+" "+f.flux.desc0, " ")
		}
		return f.flux.desc0
	}
	if f.Kind == "" {
		return "*"
	}
	return f.Kind + ":" + f.Pattern
}

// Bind fixes the filter to the running tag. A semver level (patch,
// minor, major) becomes a range from it, passing only versions written
// like it: with or without a leading v as it is, with as many numbers.
// semver:minor on 1.2.3 passes 1.3.0 but not 2.0.0, v1.3.0, 1.3 or
// 20260101. No filter on a running version passes the versions of its
// whole shape, suffix included: 1.2.4 on 1.2.3, 1.25.4-alpine on
// 1.25.3-alpine, but not 1.2.4-rc.1 on 1.2.3. Globs, regexes and ranges
// are returned as they are. No filter on a running tag that is not a
// version (latest, a branch, 1.2.3.4) passes nothing: which tag replaces
// it is for a filter to say.
// A running pre-release (1.2.0-rc.1, 2.0.0-beta2: a suffix that starts
// with alpha, beta, rc, pre, preview, dev, snapshot, milestone, canary or
// nightly) with no filter also passes its own release (1.2.0), and under
// the default order its candidates rank by semver: a pre-release moves on
// to its release, or to a later pre-release written like it. A variant's
// suffix (1.25.3-alpine) is not a pre-release.
func (f Filter) Bind(current string) (Filter, error) {
	if f.flux != nil {
		return f, nil
	}
	if f.Kind == "" {
		if s, ok := shapeOf(current); ok {
			f.like, f.bound = &s, current
			if s.pre && f.Order == ByTime {
				// A pre-release moves on as semver orders versions: to a
				// later pre-release written like it, or to a release.
				f.Order = BySemver
			}
		} else {
			f.none, f.bound = true, current
		}
		return f, nil
	}
	if f.level == "" {
		return f, nil
	}
	v, err := semver.NewVersion(current)
	s, ok := shapeOf(current)
	if err != nil || !ok {
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
	s.anySuffix = true
	f.constraint, f.level, f.like, f.bound = c, "", &s, current
	return f, nil
}

// Key names what the filter passes, for keeping lists by filter: filters
// with the same key pass the same tags. It is the filter as written, and
// the running tag for one bound to it.
func (f Filter) Key() string {
	k := f.String()
	if f.Prerelease {
		// Match passes pre-releases then: a list cached under the
		// same pattern without it must not answer for it, nor the
		// other way round.
		k += " with pre-releases"
	}
	if f.bound != "" {
		k += " on " + f.bound
	}
	return k
}

// Match reports whether a tag passes the filter. A semver level that was
// not bound passes nothing. cosign's own tags (CosignArtifact) pass no
// filter, EveryTag and glob * included: this is the one place every
// candidate list is filtered.
func (f Filter) Match(tag string) bool {
	if CosignArtifact(tag) {
		return false
	}
	if f.flux != nil {
		return f.fluxMatch(tag)
	}
	switch f.Kind {
	case "":
		if f.none {
			return false
		}
		s, ok := shapeOf(tag)
		if f.like == nil {
			return ok && s.suffix == ""
		}
		if ok && f.like.pre && s.suffix == "" && s.v == f.like.v && s.numbers == f.like.numbers {
			// On a pre-release (1.2.0-rc.1), its own release (1.2.0):
			// later releases stay for a filter to admit, as they would
			// from the release.
			return releaseOf(tag, f.bound)
		}
		return ok && f.like.fits(s)
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
		if f.like != nil {
			if s, ok := shapeOf(tag); !ok || !f.like.fits(s) {
				return false
			}
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
	if f.flux != nil {
		sort.SliceStable(tags, func(i, j int) bool { return f.fluxNewer(tags[i], tags[j]) })
		return
	}
	switch f.Order {
	case BySemver:
		// Each tag is parsed once, not at every comparison: ranking the
		// 10,000 tags of a big repository is then milliseconds.
		vs := make(map[string]*semver.Version, len(tags))
		for _, t := range tags {
			if v, err := semver.NewVersion(t); err == nil {
				vs[t] = v
			}
		}
		sort.SliceStable(tags, func(i, j int) bool {
			a, b := tags[i], tags[j]
			va, vb := vs[a], vs[b]
			switch {
			case va == nil || vb == nil:
				return va != nil && vb == nil
			case !va.Equal(vb):
				return va.GreaterThan(vb)
			}
			return a > b
		})
	case ByNumerical:
		sort.SliceStable(tags, func(i, j int) bool { return f.Newer(tags[i], tags[j]) })
	default:
		sort.SliceStable(tags, func(i, j int) bool { return tags[i] > tags[j] })
	}
}

// Newer reports whether tag a ranks above tag b under the filter's order
// (for ByTime, which needs metadata, it falls back to names).
func (f Filter) Newer(a, b string) bool {
	if f.flux != nil {
		return f.fluxNewer(a, b)
	}
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

// shape is how a version tag is written: with or without a leading v, how
// many numbers, and its suffix with every run of digits read as 0, so that
// 1.2.3-alpine3.18 and 1.3.0-alpine3.19 share a shape, and 1.3.0 and
// 1.3.0-rc.1 do not.
type shape struct {
	v         bool
	numbers   int
	suffix    string
	anySuffix bool // the suffix does not count (semver levels)
	// pre: the suffix is a pre-release's (rc.1, beta2), not a variant's.
	pre bool
}

var (
	versionTag = regexp.MustCompile(`^(v?)(\d+)(\.\d+)?(\.\d+)?(?:-([0-9A-Za-z.-]+))?$`)
	digitRun   = regexp.MustCompile(`\d+`)
)

// shapeOf is the shape of a tag that is a version: one to three numbers,
// perhaps a v before them and a suffix after a dash, which Masterminds
// parses.
func shapeOf(tag string) (shape, bool) {
	// Plans ask for the same tags' shapes over and over (every workload
	// that runs a repository, every plan): remember them. Tags are few
	// next to the registry cache that holds them, and this map keeps only
	// a bool, a count and a short suffix per tag.
	if v, ok := shapes.Load(tag); ok {
		r := v.(shapeResult)
		return r.s, r.ok
	}
	s, ok := parseShape(tag)
	shapes.Store(tag, shapeResult{s, ok})
	return s, ok
}

type shapeResult struct {
	s  shape
	ok bool
}

var shapes sync.Map // tag → shapeResult

func parseShape(tag string) (shape, bool) {
	m := versionTag.FindStringSubmatch(tag)
	if m == nil {
		return shape{}, false
	}
	if _, err := semver.NewVersion(tag); err != nil {
		return shape{}, false
	}
	s := shape{v: m[1] == "v", numbers: 1, suffix: digitRun.ReplaceAllString(m[5], "0")}
	if word, _, _ := strings.Cut(strings.ReplaceAll(m[5], "-", "."), "."); word != "" {
		s.pre = preReleaseWord.MatchString(word)
	}
	for _, n := range m[3:5] {
		if n != "" {
			s.numbers++
		}
	}
	return s, true
}

// releaseOf reports whether version tag is the release of pre-release
// pre: the same version without its suffix.
func releaseOf(tag, pre string) bool {
	vt, et := semver.NewVersion(tag)
	vp, ep := semver.NewVersion(pre)
	if et != nil || ep != nil {
		return false
	}
	r, err := vp.SetPrerelease("")
	return err == nil && vt.Equal(&r)
}

// preReleaseWord is a suffix's first word that marks a pre-release (as
// in 1.2.0-rc.1 or 2.0.0-beta2), rather than a variant of the release
// (1.25.3-alpine, 3.12.1-slim), which semver's syntax cannot tell apart.
var preReleaseWord = regexp.MustCompile(`(?i)^(alpha|beta|rc|cr|pre|preview|dev|snapshot|milestone|canary|nightly)\d*$`)

// fits reports whether a tag of shape t is written like the running one.
func (s shape) fits(t shape) bool {
	return s.v == t.v && s.numbers == t.numbers && (s.anySuffix || s.suffix == t.suffix)
}

// IsVersion reports whether tag is a version as tag filters read them
// (1.2.3, v1.2, 1.25.3-alpine): one that no filter compares by shape.
func IsVersion(tag string) bool {
	_, ok := shapeOf(tag)
	return ok
}
