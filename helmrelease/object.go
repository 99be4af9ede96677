package helmrelease

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FindIn is Find over decoded values (spec.values of an object read from
// the cluster, or of a rendered manifest).
func FindIn(annotations map[string]string, values map[string]any) ([]Image, []string, error) {
	if len(values) == 0 {
		imgs, warnings := Find(annotations, nil)
		return imgs, warnings, nil
	}
	var n yaml.Node
	if err := n.Encode(values); err != nil {
		return nil, nil, fmt.Errorf("reading spec.values: %w", err)
	}
	imgs, warnings := Find(annotations, &n)
	return imgs, warnings, nil
}

// Set writes value at path in decoded values, where a Field of the same
// values says a string is. A path element under a list is the item's
// index.
func Set(values map[string]any, path []string, value string) error {
	if len(path) == 0 {
		return fmt.Errorf("an empty path in spec.values")
	}
	var cur any = values
	for i, k := range path {
		last := i == len(path)-1
		var next any
		put := func() error {
			if _, ok := next.(string); !ok {
				return fmt.Errorf("spec.values.%s is not a string", strings.Join(path, "."))
			}
			return nil
		}
		switch m := cur.(type) {
		case map[string]any:
			next = m[k]
			if last {
				if err := put(); err != nil {
					return err
				}
				m[k] = value
				return nil
			}
		case map[any]any:
			next = m[k]
			if last {
				if err := put(); err != nil {
					return err
				}
				m[k] = value
				return nil
			}
		case []any:
			j, err := strconv.Atoi(k)
			if err != nil || j < 0 || j >= len(m) {
				return fmt.Errorf("spec.values has no %s", strings.Join(path[:i+1], "."))
			}
			next = m[j]
			if last {
				if err := put(); err != nil {
					return err
				}
				m[j] = value
				return nil
			}
		default:
			return fmt.Errorf("spec.values has no %s", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return nil
}

// IsHelmRelease says whether apiVersion and kind are a HelmRelease fluxd
// reads: Flux v2's helm.toolkit.fluxcd.io (v2, v2beta2, v2beta1) or Flux
// v1's helm.fluxcd.io/v1.
func IsHelmRelease(apiVersion, kind string) bool {
	if kind != "HelmRelease" {
		return false
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	return group == "helm.toolkit.fluxcd.io" || apiVersion == "helm.fluxcd.io/v1"
}
