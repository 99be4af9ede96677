package release

import (
	"fmt"

	"github.com/fluxd/fluxd/policy"
	"github.com/fluxd/fluxd/registry"
)

// Tag filter annotations. A container's own filter wins over the one for
// all containers; the order applies to glob and regex filters (semver
// filters order by version).
const (
	AnnotationTagPrefix = policy.TagPrefix
	AnnotationTagAll    = policy.TagAll
	AnnotationTagOrder  = policy.TagOrder
	// AnnotationTagPrerelease "true" lets semver filters pass pre-releases.
	AnnotationTagPrerelease = policy.TagPrerelease
)

// ContainerFilter returns the tag filter a workload's annotations set for
// one container, or an error naming the annotation that is wrong.
func ContainerFilter(ann map[string]string, container string) (registry.Filter, error) {
	order, err := registry.ParseOrder(ann[AnnotationTagOrder])
	if err != nil {
		return registry.Filter{}, fmt.Errorf("annotation %s: %w", AnnotationTagOrder, err)
	}
	key := AnnotationTagPrefix + container
	// An empty container filter was cleared: the one for all applies.
	pattern := ann[key]
	if pattern == "" {
		key, pattern = AnnotationTagAll, ann[AnnotationTagAll]
	}
	f, err := registry.ParseFilter(pattern, order)
	if err != nil {
		return registry.Filter{}, fmt.Errorf("annotation %s: %w", key, err)
	}
	f.Prerelease = ann[AnnotationTagPrerelease] == "true"
	return f, nil
}

// FilterAnnotations returns the annotation changes that set a policy's
// filters: a pattern of "*" or "" clears one. Every pattern is parsed
// first, so that a bad one is refused before anything is written.
func FilterAnnotations(tagAll *string, perContainer map[string]string, order *string, prerelease *bool) (map[string]string, error) {
	set := map[string]string{}
	norm := func(p string) (string, error) {
		if p == "*" || p == "" {
			return "", nil
		}
		if _, err := registry.ParseFilter(p, ""); err != nil {
			return "", err
		}
		return p, nil
	}
	if tagAll != nil {
		p, err := norm(*tagAll)
		if err != nil {
			return nil, err
		}
		set[AnnotationTagAll] = p
	}
	for c, p := range perContainer {
		if c == "" {
			return nil, fmt.Errorf("--tag %q names no container: write CONTAINER=PATTERN", "="+p)
		}
		p, err := norm(p)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c, err)
		}
		set[AnnotationTagPrefix+c] = p
	}
	if prerelease != nil {
		set[AnnotationTagPrerelease] = map[bool]string{true: "true", false: ""}[*prerelease]
	}
	if order != nil {
		o, err := registry.ParseOrder(*order)
		if err != nil {
			return nil, err
		}
		if o == registry.ByTime {
			set[AnnotationTagOrder] = ""
		} else {
			set[AnnotationTagOrder] = string(o)
		}
	}
	return set, nil
}
