package gitrepo

import (
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// affix is the name prefix and suffix a build gives the objects of a
// file it reads as a resource.
type affix struct{ prefix, suffix string }

// maxNameDepth bounds how deep affixes follows bases (a cycle is
// refused by kustomize itself).
const maxNameDepth = 32

// affixes are, for each file the build of the kustomization in rel reads
// as a resource (its own resources, its bases' and theirs), the name
// prefixes and suffixes the build gives that file's objects: every
// kustomization's namePrefix and nameSuffix along the way, the outermost
// first (kustomize prefixes a base's objects, then the overlay prefixes
// them again). A file reached twice, through two bases, has both. ok is
// false when fluxd cannot tell exactly: a kustomization on the way uses
// components (whose own namePrefix applies to the resources of the
// kustomization that names them), or one it cannot read; names are then
// matched as before, by "contains" (Setter.BuiltNames).
func (k *kustomizer) affixes(rel string) (map[string][]affix, bool) {
	out := map[string][]affix{}
	ok := k.affixesOf(path.Clean("/"+filepath.ToSlash(rel)), affix{}, out, 0)
	return out, ok
}

func (k *kustomizer) affixesOf(dir string, outer affix, out map[string][]affix, depth int) bool {
	if depth > maxNameDepth {
		return false
	}
	b, err := k.fs.ReadFile(path.Join(dir, kustomizationIn(k.fs, dir)))
	if err != nil {
		return false
	}
	var kust struct {
		NamePrefix string   `yaml:"namePrefix"`
		NameSuffix string   `yaml:"nameSuffix"`
		Resources  []string `yaml:"resources"`
		Bases      []string `yaml:"bases"`
		Components []string `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &kust); err != nil || len(kust.Components) > 0 {
		return false
	}
	here := affix{prefix: outer.prefix + kust.NamePrefix, suffix: kust.NameSuffix + outer.suffix}
	ok := true
	for _, r := range append(kust.Resources, kust.Bases...) {
		if remotePath(r) {
			return false // (refused by checkLocal before any build)
		}
		p := path.Join(dir, r)
		switch {
		case !k.fs.Exists(p):
			return false
		case k.fs.IsDir(p):
			ok = k.affixesOf(p, here, out, depth+1) && ok
		default:
			f := strings.TrimPrefix(p, "/")
			out[f] = append(out[f], here)
		}
	}
	return ok
}

// names are name with each of affixes.
func names(name string, affixes []affix) []string {
	var out []string
	for _, a := range affixes {
		n := a.prefix + name + a.suffix
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// BuiltNames are the names the build of kustomization file build gives
// the object holding s (s.ObjectName, with the namePrefix and nameSuffix
// of every kustomization from build down to s's file); ok is false when
// fluxd could not tell them (components on the way, or s's file read
// otherwise than as a resource, such as a patch), and a build's object
// is then taken for s's when its name contains s.ObjectName.
func (s Setter) BuiltNames(build string) (names []string, ok bool) {
	names, ok = s.builtNames[build]
	return names, ok
}

// MovedByName says whether an object of s's kind named name, which the
// kustomization file build builds, is s's object as built: named
// exactly as BuiltNames says, or, where those are unknown, with a name
// that contains s.ObjectName.
func (s Setter) MovedByName(build, name string) bool {
	if exact, ok := s.BuiltNames(build); ok {
		return slices.Contains(exact, name)
	}
	return strings.Contains(name, s.ObjectName)
}
