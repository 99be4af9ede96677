package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// entry is one policy a dialect sets: its value in fluxd's vocabulary and
// the annotation, as written, that set it.
type entry struct {
	value, source string
	// implicit marks a value no annotation states (the lock message of an
	// ignored workload): it never disagrees.
	implicit bool
}

// reading is what one dialect's annotations on a workload say, keyed by
// fluxd's own annotation names.
type reading map[string]entry

// Read returns a workload's annotations with its policy in fluxd's own
// vocabulary: every annotation as written, plus the fluxd.io/ keys that the
// Flux v1 and Keel annotations it carries mean. The warnings say where
// dialects disagree (fluxd's own wins) and what fluxd cannot honour. raw is
// not changed.
func Read(raw map[string]string) (map[string]string, []string) {
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = v
	}
	var warnings []string
	flux, w := readFlux(raw, FluxPrefix)
	warnings = append(warnings, w...)
	filter := readFluxFilter(raw)
	legacy, w := readFlux(raw, FluxLegacyPrefix)
	warnings = append(warnings, w...)
	keel, w := readKeel(raw)
	warnings = append(warnings, w...)
	won := reading{}
	for k, v := range raw {
		if ownPolicyKey(k) {
			won[k] = entry{value: v, source: k}
		}
	}
	for _, r := range []reading{flux, filter, legacy, keel} {
		for _, k := range sortedKeys(r) {
			e := r[k]
			if w, ok := won[k]; ok {
				if !e.implicit && !w.implicit && !same(k, w.value, e.value) {
					warnings = append(warnings, fmt.Sprintf("policy annotations disagree: %s: %q is overridden by %s: %q (fluxd.io/ wins, then fluxcd.io/, filter.fluxcd.io/, flux.weave.works/, keel.sh/); remove the one you do not mean",
						e.source, raw[e.source], w.source, raw[w.source]))
				}
				continue
			}
			won[k] = e
			out[k] = e.value
		}
	}
	// Flux v1 passes every tag to a container with no tag filter (its
	// default pattern is glob:*): a workload Flux v1 automates keeps that
	// meaning, unless fluxd's own or Keel's annotations set a filter.
	if a, ok := won[Automated]; (!ok && (len(flux) > 0 || len(filter) > 0 || len(legacy) > 0)) || (ok && fluxSource(a.source)) {
		if _, set := won[TagAll]; !set {
			out[TagAll] = "glob:*"
		}
	}
	sort.Strings(warnings)
	return out, warnings
}

// Write returns the annotations to write (a value of "" removes one) so
// that a workload annotated raw takes the policy change set, given in
// fluxd's own vocabulary. Each policy is written where the workload keeps
// it: fluxd's own annotation when it has one, else the Flux v1 prefix it
// uses, when Flux v1 can say the value; otherwise fluxd's own. Every other
// dialect's form of a policy that is written is removed, so that none
// disagrees. Keel's keel.sh/policy holds automation and filter in one
// value that cannot hold all of fluxd's: changing either moves both to
// fluxd's own annotations.
func Write(raw, set map[string]string) map[string]string {
	out := map[string]string{}
	prefix := fluxPrefixInUse(raw)
	keel, _ := readKeel(raw)
	convertKeel := false
	for _, k := range sortedKeys(set) {
		v := set[k]
		target, tv := k, v
		if _, own := raw[k]; !own && prefix != "" {
			if fk, fv, ok := fluxForm(raw, prefix, k, v); ok {
				target, tv = fk, fv
			}
		}
		out[target] = tv
		for _, fk := range fluxKeys(k) {
			if _, has := raw[fk]; has && fk != target {
				out[fk] = ""
			}
		}
		for _, p := range []string{FluxPrefix, FluxLegacyPrefix} {
			// Unlocking a workload Flux v1 ignores lets fluxd release it.
			if k == Locked && v == "" && raw[p+"ignore"] == "true" {
				out[p+"ignore"] = ""
			}
		}
		if _, ok := keel[k]; ok {
			convertKeel = true
		}
	}
	if convertKeel {
		out[KeelPolicy] = ""
		if _, ok := raw[KeelMatchTag]; ok {
			out[KeelMatchTag] = ""
		}
		for k, e := range keel {
			if _, ok := set[k]; !ok {
				out[k] = e.value
			}
		}
	}
	return out
}

// readFlux reads Flux v1's annotations under one of its prefixes, with
// Flux v1's meaning (fluxcd/flux pkg/policy): booleans are on only when
// "true"; a tag pattern is glob: unless it says semver:, regexp: or regex:.
func readFlux(raw map[string]string, prefix string) (reading, []string) {
	r := reading{}
	var warnings []string
	for k, v := range raw {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		switch {
		case name == "automated":
			r[Automated] = entry{value: boolean(v), source: k}
		case name == "locked":
			r[Locked] = entry{value: boolean(v), source: k}
		case name == "locked_msg":
			r[LockMessage] = entry{value: v, source: k}
		case name == "locked_user":
			r[LockedBy] = entry{value: v, source: k}
		case strings.HasPrefix(name, "tag.") && len(name) > len("tag."):
			r[TagPrefix+name[len("tag."):]] = entry{value: fluxFilter(v), source: k}
		}
	}
	if ig := prefix + "ignore"; raw[ig] == "true" {
		// Flux v1 leaves an ignored workload out of releases: so does a
		// lock, which is how fluxd shows it. The sync leaves it out too
		// (platform/kube/sync, FluxIgnore); "sync_only" concerns pruning
		// alone.
		r[Locked] = entry{value: "true", source: ig}
		if _, ok := r[LockMessage]; !ok {
			r[LockMessage] = entry{value: "ignored (" + ig + ": \"true\")", source: ig, implicit: true}
		}
	}
	return r, warnings
}

// readFluxFilter reads Flux v1's filter.fluxcd.io/CONTAINER, which Flux
// v1 reads as fluxcd.io/tag.CONTAINER (its resource.PoliciesFromAnnotations
// maps one to the other): a tag pattern, with the same syntax.
func readFluxFilter(raw map[string]string) reading {
	r := reading{}
	for k, v := range raw {
		if c, ok := strings.CutPrefix(k, FluxFilterPrefix); ok && c != "" {
			r[TagPrefix+c] = entry{value: fluxFilter(v), source: k}
		}
	}
	return r
}

// fluxFilter is a Flux v1 tag pattern in fluxd's filter syntax.
func fluxFilter(p string) string {
	switch {
	case p == "":
		return ""
	case strings.HasPrefix(p, "semver:"):
		return p
	case strings.HasPrefix(p, "regexp:"):
		return "regex:" + strings.TrimPrefix(p, "regexp:")
	case strings.HasPrefix(p, "regex:"):
		return p
	}
	return "glob:" + escapeGlob(strings.TrimPrefix(p, "glob:"))
}

// escapeGlob makes a Flux v1 or Keel glob, where only * is special, a
// path.Match pattern that means the same.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, c := range p {
		if c == '\\' || c == '?' || c == '[' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fluxForm is the Flux v1 annotation, under prefix, for one of fluxd's
// policies on a workload annotated raw, and the value it takes there; ok
// is false where Flux v1 has no such annotation or cannot say the value.
// A tag filter takes the form the workload uses for it:
// filter.fluxcd.io/CONTAINER where that is written, or where the workload
// writes its filters so and none as PREFIX/tag.; else PREFIX/tag.CONTAINER.
func fluxForm(raw map[string]string, prefix, key, value string) (string, string, bool) {
	switch key {
	case Automated:
		return prefix + "automated", value, true
	case Locked:
		return prefix + "locked", value, true
	case LockMessage:
		return prefix + "locked_msg", value, true
	case LockedBy:
		return prefix + "locked_user", value, true
	}
	c, ok := strings.CutPrefix(key, TagPrefix)
	if !ok || c == "" {
		return "", "", false
	}
	name := prefix + "tag." + c
	if filterForm(raw, prefix, c) {
		name = FluxFilterPrefix + c
	}
	kind, pattern, _ := strings.Cut(value, ":")
	switch {
	case value == "":
		return name, "", true
	case kind == "glob" && !strings.ContainsAny(pattern, `\?[`):
		return name, value, true
	case kind == "regex":
		return name, value, true
	case kind == "semver" && pattern != "patch" && pattern != "minor" && pattern != "major":
		return name, value, true
	}
	// fluxd's semver levels and path.Match classes have no Flux v1 form.
	return name, "", false
}

// filterForm says whether container c's filter is written as
// filter.fluxcd.io/c, rather than as prefix's tag.c, on a workload
// annotated raw.
func filterForm(raw map[string]string, prefix, c string) bool {
	if _, ok := raw[FluxFilterPrefix+c]; ok {
		return true
	}
	if _, ok := raw[prefix+"tag."+c]; ok {
		return false
	}
	filters, tags := false, false
	for k := range raw {
		if n, ok := strings.CutPrefix(k, FluxFilterPrefix); ok && n != "" {
			filters = true
		}
		if n, ok := strings.CutPrefix(k, prefix+"tag."); ok && n != "" {
			tags = true
		}
	}
	return filters && !tags
}

// fluxKeys are every Flux v1 annotation that can hold fluxd's policy key,
// under either prefix and in either form.
func fluxKeys(key string) []string {
	var out []string
	for _, p := range []string{FluxPrefix, FluxLegacyPrefix} {
		if fk, _, ok := fluxForm(nil, p, key, ""); ok {
			out = append(out, fk)
		}
	}
	if c, ok := strings.CutPrefix(key, TagPrefix); ok && c != "" {
		out = append(out, FluxFilterPrefix+c)
	}
	return out
}

// fluxPrefixInUse is the Flux v1 prefix a workload's policy annotations
// use, fluxcd.io/ first (filter.fluxcd.io/ is of its family), or "".
func fluxPrefixInUse(raw map[string]string) string {
	for _, p := range []string{FluxPrefix, FluxLegacyPrefix} {
		if r, _ := readFlux(raw, p); len(r) > 0 {
			return p
		}
		if _, ok := raw[p+"ignore"]; ok {
			return p
		}
	}
	if len(readFluxFilter(raw)) > 0 {
		return FluxPrefix
	}
	return ""
}

// readKeel reads Keel's keel.sh/policy and keel.sh/match-tag with Keel's
// meaning (keel-hq/keel internal/policy): a policy automates the workload
// and filters every container's tags.
func readKeel(raw map[string]string) (reading, []string) {
	p, ok := raw[KeelPolicy]
	if !ok {
		if _, mt := raw[KeelMatchTag]; mt {
			return nil, []string{KeelMatchTag + " does nothing without " + KeelPolicy + ": force (as in Keel)"}
		}
		return nil, nil
	}
	src := KeelPolicy
	automate := func(filter string) reading {
		return reading{Automated: {value: "true", source: src}, TagAll: {value: filter, source: src}}
	}
	off := reading{Automated: {value: "false", source: src}}
	p = strings.TrimSpace(p)
	switch {
	case strings.HasPrefix(p, "glob:"):
		return automate("glob:" + escapeGlob(strings.TrimPrefix(p, "glob:"))), nil
	case strings.HasPrefix(p, "regexp:"):
		re := strings.TrimPrefix(p, "regexp:")
		if _, err := regexp.Compile(re); err != nil {
			return off, []string{fmt.Sprintf("%s: %q is not a regular expression (%v), so, as in Keel, nothing is automated; fix the expression", src, p, err)}
		}
		return automate("regex:" + re), nil
	case p == "all":
		r := automate("semver:major")
		r[TagPrerelease] = entry{value: "true", source: src}
		return r, nil
	case p == "major" || p == "minor" || p == "patch":
		return automate("semver:" + p), nil
	case p == "force":
		// Keel's force updates to whatever is pushed, a new push of the
		// running tag included: fluxd pins digests to see those.
		if raw[KeelMatchTag] == "true" {
			// ... of the running tag only.
			return reading{Automated: {value: "true", source: src}, PinDigest: {value: "true", source: src}, FollowTag: {value: "true", source: KeelMatchTag}}, nil
		}
		r := automate("glob:*")
		r[PinDigest] = entry{value: "true", source: src}
		return r, nil
	}
	return off, []string{fmt.Sprintf("%s: %q is not a Keel policy (all, major, minor, patch, force, glob:PATTERN, regexp:PATTERN), so, as in Keel, nothing is automated", src, p)}
}

// ownPolicyKey says whether k is one of fluxd's policies another dialect
// can also set.
func ownPolicyKey(k string) bool {
	switch k {
	case Automated, Locked, LockMessage, LockedBy, TagAll, TagPrerelease:
		return true
	}
	return (strings.HasPrefix(k, TagPrefix) && len(k) > len(TagPrefix)) || pinKey(k)
}

func fluxSource(k string) bool {
	return strings.HasPrefix(k, FluxPrefix) || strings.HasPrefix(k, FluxLegacyPrefix) || strings.HasPrefix(k, FluxFilterPrefix)
}

// same compares two values of policy k as their readers do.
func same(k, a, b string) bool {
	switch k {
	case Automated, Locked, TagPrerelease, PinDigest, FollowTag:
		return (a == "true") == (b == "true")
	}
	if strings.HasPrefix(k, TagPrefix) || k == TagAll {
		norm := func(s string) string {
			if s == "*" {
				return ""
			}
			return s
		}
		return norm(a) == norm(b)
	}
	return a == b
}

func boolean(v string) string {
	if v == "true" {
		return "true"
	}
	return "false"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
