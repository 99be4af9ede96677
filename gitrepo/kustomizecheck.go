package gitrepo

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kustomize's file loader fetches any path that is an http(s) URL with
// its own http.Client and clones any path that reads as a repository
// (a scheme, "git::", "user@host:", "github.com/..."), wherever the
// kustomization names a file: resources and bases, but also generators'
// files and envs, patches, transformers, generators, validators, crds,
// openapi, configurations and replacements, and the plugin configuration
// files that transformers/generators/validators name. krusty offers no
// way to hand the loader an HTTP client or a cloner (both live in
// kustomize's internal packages, and the in-memory file system is only
// consulted after the URL check), so fluxd refuses such a path before
// kustomize runs: it walks every kustomization the build reaches and
// every configuration file it loads, and checks every value of a
// path-bearing key, at any depth.

// pathKeys are the keys whose values kustomize (or one of its builtin
// plugins, configured inline or from a file) loads as a path.
var pathKeys = map[string]bool{
	"resources": true, "bases": true, "components": true, "crds": true,
	"configurations": true, "generators": true, "transformers": true, "validators": true,
	"patchesStrategicMerge": true, "path": true, "files": true, "envs": true, "env": true,
	"openapi": true, "replacements": true, "patchesJson6902": true, "patches": true,
	"chartHome": true, "valuesFile": true, "additionalValuesFiles": true, "repo": true,
}

// pluginKeys name files (or kustomization directories) whose content
// kustomize loads as plugin configuration, itself full of paths.
var pluginKeys = map[string]bool{"generators": true, "transformers": true, "validators": true}

// dirKeys name kustomization directories kustomize builds.
var dirKeys = map[string]bool{"resources": true, "bases": true, "components": true}

// remotePath reports whether kustomize would fetch p over the network: an
// http(s) URL, or anything its repository parser would take for a git
// repository to clone.
func remotePath(p string) bool {
	l := strings.ToLower(strings.TrimSpace(p))
	if strings.Contains(l, "://") || strings.HasPrefix(l, "git::") || strings.HasPrefix(l, "github.com") {
		return true
	}
	// user@host:path (SCP style), which kustomize clones over ssh.
	first, _, _ := strings.Cut(l, "/")
	return strings.Contains(first, "@")
}

// checkLocal refuses a kustomization (and the kustomizations and
// configuration files it loads) naming anything kustomize would fetch
// over the network, or a resource, base or component that is not in the
// repository. The error names the file and line.
func (k *kustomizer) checkLocal(dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file := path.Join(dir, kustomizationIn(k.fs, dir))
	return k.checkFile(file, dir, true, seen)
}

// checkFile walks one YAML file (a kustomization when kust is set, else
// a plugin configuration), relative paths in it resolved against dir.
func (k *kustomizer) checkFile(file, dir string, kust bool, seen map[string]bool) error {
	if seen["file:"+file] {
		return nil
	}
	seen["file:"+file] = true
	b, err := k.fs.ReadFile(file)
	if err != nil {
		return nil // kustomize reports it
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return nil // the end, or bad YAML kustomize reports
		}
		if err := k.walk(&doc, "", file, dir, kust, seen); err != nil {
			return err
		}
	}
}

// checkInline walks an inline plugin configuration (a YAML string in a
// kustomization), its lines counted from the string's.
func (k *kustomizer) checkInline(n *yaml.Node, file, dir string, seen map[string]bool) error {
	dec := yaml.NewDecoder(strings.NewReader(n.Value))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return nil
		}
		if err := k.walk(&doc, "", file, dir, false, seen); err != nil {
			var p Problem
			if errors.As(err, &p) && p.Line > 0 {
				p.Line += n.Line // a literal block starts on the line after its key
				return p
			}
			return err
		}
	}
}

// walk checks node, the value of key, and everything below it.
func (k *kustomizer) walk(n *yaml.Node, key, file, dir string, kust bool, seen map[string]bool) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := k.walk(c, key, file, dir, kust, seen); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := k.walk(n.Content[i+1], n.Content[i].Value, file, dir, kust, seen); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if err := k.walk(c, key, file, dir, kust, seen); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if kust && pluginKeys[key] && strings.Contains(n.Value, "\n") {
			// An inline plugin configuration: its paths count too.
			return k.checkInline(n, file, dir, seen)
		}
		if !pathKeys[key] || strings.Contains(n.Value, "\n") {
			return nil // not a path, or an inline patch
		}
		return k.checkPath(n, key, file, dir, kust, seen)
	}
	return nil
}

func (k *kustomizer) checkPath(n *yaml.Node, key, file, dir string, kust bool, seen map[string]bool) error {
	v := n.Value
	if key == "files" {
		if _, p, ok := strings.Cut(v, "="); ok {
			v = p // key=path
		}
	}
	rel := strings.TrimPrefix(file, "/")
	if remotePath(v) {
		return Problem{File: rel, Line: n.Line, Err: fmt.Errorf("%s names %q, which kustomize would fetch over the network: fluxd builds kustomizations from the repository alone and fetches nothing a repository names; vendor it into the repository", key, v)}
	}
	p := path.Join(dir, v)
	seen["read:"+p] = true // a file the build reads (see reads)
	if kust && dirKeys[key] {
		if !k.fs.Exists(p) {
			return Problem{File: rel, Line: n.Line, Err: fmt.Errorf("names %q, which is not a file or directory in the repository (%s): fluxd builds kustomizations from the repository alone and fetches no remote base; vendor it into the repository", v, strings.TrimPrefix(p, "/"))}
		}
		if k.fs.IsDir(p) {
			return k.checkLocal(p, seen)
		}
		return nil
	}
	if kust && pluginKeys[key] && k.fs.Exists(p) {
		if k.fs.IsDir(p) {
			return k.checkLocal(p, seen)
		}
		return k.checkFile(p, dir, false, seen)
	}
	return nil
}

// reads are the repository's files (relative paths) a build of the
// kustomization in rel reads, as far as fluxd can tell: its
// kustomization file, the kustomizations of its bases and components,
// and every file they name (resources, patches, generators' files).
func (k *kustomizer) reads(rel string) []string {
	seen := map[string]bool{}
	dir := path.Clean("/" + filepath.ToSlash(rel))
	if err := k.checkLocal(dir, seen); err != nil {
		return nil
	}
	var out []string
	for key := range seen {
		f, ok := strings.CutPrefix(key, "file:")
		if !ok {
			f, ok = strings.CutPrefix(key, "read:")
		}
		if ok && k.fs.Exists(f) && !k.fs.IsDir(f) {
			out = append(out, strings.TrimPrefix(f, "/"))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
