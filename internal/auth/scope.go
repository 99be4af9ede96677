package auth

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Scope is where an instance may act: the services in these namespaces
// and, when Paths is set, defined in git under one of these paths. A
// service outside it is, to the instance's callers, a service that does
// not exist. A nil *Scope is no scope: everything, as before scopes
// existed.
type Scope struct {
	// Namespaces are the namespaces of the instance's services; at least
	// one.
	Namespaces []string
	// Paths, when set, narrow them to the services git defines in files
	// under one of these repository paths (relative, slash-separated). A
	// service that is only in the cluster, not in git, is in scope by
	// its namespace alone: it cannot be released or changed through git
	// anyway.
	Paths []string
}

// Contains says whether a service of namespace, defined in git in file
// ("" when git does not define it), is in the scope. A nil scope contains
// everything.
func (s *Scope) Contains(namespace, file string) bool {
	if s == nil {
		return true
	}
	if !slices.Contains(s.Namespaces, namespace) {
		return false
	}
	if len(s.Paths) == 0 || file == "" {
		return true
	}
	file = path.Clean(file)
	for _, p := range s.Paths {
		if p == "." || file == p || strings.HasPrefix(file, p+"/") {
			return true
		}
	}
	return false
}

// String is the scope as the tokens file writes it.
func (s *Scope) String() string {
	if s == nil {
		return "everything"
	}
	out := "namespaces=" + strings.Join(s.Namespaces, ",")
	if len(s.Paths) > 0 {
		out += " paths=" + strings.Join(s.Paths, ",")
	}
	return out
}

// namespaceRE is a DNS-1123 label, the rule for namespace names (written
// out rather than imported from apimachinery, which this package, shared
// with fluxctl, keeps out).
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// parseScope parses a tokens file's scope line after its instance:
// "namespaces=a,b [paths=x/y,z]".
func parseScope(fields []string) (*Scope, error) {
	s := &Scope{}
	seen := map[string]bool{}
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		if !ok || seen[key] {
			return nil, fmt.Errorf("%q: want namespaces=NS[,NS...] and, optionally, paths=PATH[,PATH...], each once", f)
		}
		seen[key] = true
		var items []string
		for _, v := range strings.Split(val, ",") {
			if v = strings.TrimSpace(v); v != "" {
				items = append(items, v)
			}
		}
		switch key {
		case "namespaces":
			for _, ns := range items {
				if len(ns) > 63 || !namespaceRE.MatchString(ns) {
					return nil, fmt.Errorf("namespace %q is not a namespace name (a DNS label: up to 63 lower-case letters, digits and '-', starting and ending with a letter or digit)", ns)
				}
			}
			s.Namespaces = items
		case "paths":
			for _, p := range items {
				clean := path.Clean(p)
				if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p, "\\") {
					return nil, fmt.Errorf("path %q: give a path inside the repository, relative to its root, e.g. teams/a", p)
				}
				s.Paths = append(s.Paths, clean)
			}
		default:
			return nil, fmt.Errorf("%q: unknown key %q; want namespaces=NS[,NS...] and, optionally, paths=PATH[,PATH...]", f, key)
		}
	}
	if len(s.Namespaces) == 0 {
		return nil, errors.New("a scope needs namespaces=NS[,NS...]: the namespaces the instance may act in")
	}
	return s, nil
}
