package helmrelease

import (
	"fmt"
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
// values says a string is.
func Set(values map[string]any, path []string, value string) error {
	var cur any = values
	for i, k := range path {
		var next any
		switch m := cur.(type) {
		case map[string]any:
			next = m[k]
			if i == len(path)-1 {
				if _, ok := next.(string); !ok {
					return fmt.Errorf("spec.values.%s is not a string", strings.Join(path, "."))
				}
				m[k] = value
				return nil
			}
		case map[any]any:
			next = m[k]
			if i == len(path)-1 {
				if _, ok := next.(string); !ok {
					return fmt.Errorf("spec.values.%s is not a string", strings.Join(path, "."))
				}
				m[k] = value
				return nil
			}
		default:
			return fmt.Errorf("spec.values has no %s", strings.Join(path[:i+1], "."))
		}
		cur = next
	}
	return fmt.Errorf("an empty path in spec.values")
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
