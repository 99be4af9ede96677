package registry

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ImagePolicy is the tag choice of a Flux v2 ImagePolicy
// (image.toolkit.fluxcd.io, spec.policy and spec.filterTags), to be read
// as image-reflector-controller reads it. Exactly one of SemverRange,
// Alphabetical and Numerical is set.
type ImagePolicy struct {
	// SemverRange is spec.policy.semver.range: the highest version in it.
	SemverRange string
	// Alphabetical and Numerical are spec.policy.alphabetical and
	// .numerical; Desc is their order: desc.
	Alphabetical, Numerical bool
	Desc                    bool
	// Pattern is spec.filterTags.pattern (a Go regular expression; tags it
	// does not match are no candidates), Extract its extract: the
	// expansion of the match ($name, ${1}) that the policy ranks instead
	// of the whole tag.
	Pattern, Extract string
	// Exclude is the ImageRepository's spec.exclusionList: tags matching
	// any of these Go regular expressions are never candidates. nil is
	// Flux v2's default, ^.*\.sig$ (cosign signatures); an empty list
	// excludes nothing more than cosign's own tags, which no filter passes
	// (CosignArtifact).
	Exclude []string
}

// DefaultExclusions is Flux v2's ImageRepository exclusionList when it
// sets none: cosign's signature tags.
var DefaultExclusions = []string{`^.*\.sig$`}

// fluxRank is how a filter built from an ImagePolicy ranks: on the value
// filterTags extracts, in either order, numbers read as floats.
type fluxRank struct {
	// sel is filterTags.pattern; extract its extract ("" is the tag).
	sel     *regexp.Regexp
	extract string
	desc    bool
	// float: the value is a number (ParseFloat), as the numerical
	// policy reads it.
	float bool
	// exclude is the repository's exclusionList.
	exclude []*regexp.Regexp
	// desc0 is the policy as written, for String and Key.
	desc0 string
}

// ImagePolicyFilter maps a Flux v2 ImagePolicy onto a Filter, with
// image-reflector-controller's semantics where fluxd's own differ:
//
//   - alphabetical and numerical without filterTags rank every tag
//     (Ubuntu code names, RFC 3339 stamps, latest), not versions only;
//   - asc (the default) picks the highest value, desc the lowest;
//   - numerical reads the whole value as a number (1.5, 20260101, -3);
//     a value that is not one is no candidate (image-reflector-controller
//     fails the whole policy on it);
//   - semver picks the highest version in the range, written in any
//     form Masterminds parses (1, v1.2, 1.2.3-rc.1), pre-releases only
//     when the range names one;
//   - filterTags.pattern keeps the tags it matches, and the policy ranks
//     what its extract makes of each.
//
// The filter is never bound to the running tag (Bind returns it as it is).
func ImagePolicyFilter(p ImagePolicy) (Filter, error) {
	n := 0
	for _, set := range []bool{p.SemverRange != "", p.Alphabetical, p.Numerical} {
		if set {
			n++
		}
	}
	if n != 1 {
		return Filter{}, errors.New("an ImagePolicy needs exactly one of spec.policy.semver, .alphabetical and .numerical")
	}
	r := &fluxRank{extract: p.Extract, desc: p.Desc, float: p.Numerical}
	var desc []string
	exclude := p.Exclude
	if exclude == nil {
		exclude = DefaultExclusions
	}
	for _, x := range exclude {
		re, err := regexp.Compile(x)
		if err != nil {
			return Filter{}, fmt.Errorf("the ImageRepository's spec.exclusionList entry %q is not a Go regular expression: %v", x, err)
		}
		r.exclude = append(r.exclude, re)
	}
	if p.Pattern != "" {
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return Filter{}, fmt.Errorf("spec.filterTags.pattern %q is not a Go regular expression: %v", p.Pattern, err)
		}
		r.sel = re
		desc = append(desc, "filterTags "+p.Pattern)
		if p.Extract != "" {
			desc = append(desc, "extract "+p.Extract)
		}
	} else if p.Extract != "" {
		return Filter{}, fmt.Errorf("spec.filterTags.extract %q needs a pattern to extract from", p.Extract)
	}
	f := Filter{Kind: "glob", Pattern: "*", flux: r}
	order := "asc"
	if p.Desc {
		order = "desc"
	}
	switch {
	case p.SemverRange != "":
		c, err := semver.NewConstraint(p.SemverRange)
		if err != nil {
			return Filter{}, fmt.Errorf("spec.policy.semver.range %q is not a semver range: %v; examples: \">=1.0.0\", \"~1.2\", \"1.x\"", p.SemverRange, err)
		}
		f.Kind, f.Pattern, f.Order, f.constraint = "semver", p.SemverRange, BySemver, c
		if p.Desc {
			return Filter{}, errors.New("spec.policy.semver has no order; remove it")
		}
		order = ""
	case p.Alphabetical:
		f.Order = ByAlphabetical
		desc = append([]string{"alphabetical " + order}, desc...)
	default:
		f.Order = ByNumerical
		desc = append([]string{"numerical " + order}, desc...)
	}
	if p.Exclude != nil {
		desc = append(desc, "excluding "+strings.Join(p.Exclude, " "))
	}
	r.desc0 = strings.Join(desc, ", ")
	return f, nil
}

// value is what the policy ranks of tag: filterTags' extract of it, or
// the tag; false when filterTags does not match it.
func (r *fluxRank) value(tag string) (string, bool) {
	if r.sel == nil {
		return tag, true
	}
	m := r.sel.FindStringSubmatchIndex(tag)
	if m == nil {
		return "", false
	}
	if r.extract == "" {
		return tag, true
	}
	return string(r.sel.ExpandString(nil, r.extract, tag, m)), true
}

// match is Match for a filter built from an ImagePolicy.
func (f Filter) fluxMatch(tag string) bool {
	for _, x := range f.flux.exclude {
		if x.MatchString(tag) {
			return false
		}
	}
	v, ok := f.flux.value(tag)
	if !ok {
		return false
	}
	switch f.Order {
	case BySemver:
		sv, err := semver.NewVersion(v)
		return err == nil && f.constraint.Check(sv)
	case ByNumerical:
		_, err := strconv.ParseFloat(v, 64)
		return err == nil
	}
	return true
}

// fluxNewer is Newer for a filter built from an ImagePolicy: the values
// compared, the order reversed under desc, ties broken by tag name.
func (f Filter) fluxNewer(a, b string) bool {
	va, _ := f.flux.value(a)
	vb, _ := f.flux.value(b)
	cmp := 0
	switch f.Order {
	case BySemver:
		sa, ea := semver.NewVersion(va)
		sb, eb := semver.NewVersion(vb)
		switch {
		case ea != nil || eb != nil:
			return ea == nil && eb != nil
		default:
			cmp = sa.Compare(sb)
		}
	case ByNumerical:
		na, ea := strconv.ParseFloat(va, 64)
		nb, eb := strconv.ParseFloat(vb, 64)
		switch {
		case ea != nil || eb != nil:
			return ea == nil && eb != nil
		case na > nb:
			cmp = 1
		case na < nb:
			cmp = -1
		}
	default:
		cmp = strings.Compare(va, vb)
	}
	if f.flux.desc {
		cmp = -cmp
	}
	if cmp != 0 {
		return cmp > 0
	}
	return a > b
}
