package torture

import (
	"fmt"
	"path"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The model's reading of kustomize, written apart from fluxd's (which
// runs sigs.k8s.io/kustomize/api), so that the checks do not share its
// mistakes. It knows what the run's repository holds: a directory with a
// kustomization.yaml is built, not read file by file; its resources are
// files or directories that are kustomizations themselves (a base); it
// applies namePrefix, nameSuffix and images: entries (name, newName,
// newTag, digest). Every kustomization in the repository is built, a
// base on its own too, as fluxd's sync builds each under --git-path.

// kustomization is one kustomization.yaml, as the model reads it.
type kustomization struct {
	Resources  []string     `yaml:"resources"`
	NamePrefix string       `yaml:"namePrefix"`
	NameSuffix string       `yaml:"nameSuffix"`
	Images     []imageEntry `yaml:"images"`
}

type imageEntry struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
	Digest  string `yaml:"digest"`
}

// build is one way a resource file reaches the cluster: through a
// kustomization's build (its names prefixed and suffixed, its images set
// by images: entries, innermost kustomization's first), or as it is.
type build struct {
	prefix, suffix string
	images         [][]imageEntry
}

func (b build) name(n string) string { return b.prefix + n + b.suffix }

// image is img as the build makes it.
func (b build) image(img string) string {
	for _, es := range b.images {
		for _, e := range es {
			name, tag, digest := splitImage(img)
			if name != e.Name {
				continue
			}
			if e.NewName != "" {
				name = e.NewName
			}
			if e.NewTag != "" {
				tag = e.NewTag
			}
			if e.Digest != "" {
				tag, digest = "", e.Digest
			}
			img = name
			if tag != "" {
				img += ":" + tag
			}
			if digest != "" {
				img += "@" + digest
			}
		}
	}
	return img
}

// splitImage cuts an image reference into its name, tag and digest (a
// registry's port is part of the name).
func splitImage(img string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(img, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

func isKustomization(file string) bool {
	switch path.Base(file) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// kustomize finds the kustomizations among files and returns, for each
// file a build reads, every build of it (sorted by the kustomization
// that builds it), and the files that are not read as they are: every
// file in a kustomization's directory or below it.
func kustomize(files map[string][]byte) (builds map[string][]build, built map[string]bool, err error) {
	dirs := map[string]string{} // kustomization directory → its file
	for f := range files {
		if isKustomization(f) {
			dirs[path.Dir(f)] = f
		}
	}
	built = map[string]bool{}
	for f := range files {
		for d := path.Dir(f); ; d = path.Dir(d) {
			if _, ok := dirs[d]; ok {
				built[f] = true
				break
			}
			if d == "." || d == "/" {
				break
			}
		}
	}
	var roots []string
	for d := range dirs {
		roots = append(roots, d)
	}
	sort.Strings(roots)
	builds = map[string][]build{}
	var walk func(dir string, outer build, depth int) error
	walk = func(dir string, outer build, depth int) error {
		if depth > 10 {
			return fmt.Errorf("kustomization %s: bases nest deeper than 10", dir)
		}
		var k kustomization
		if err := yaml.Unmarshal(files[dirs[dir]], &k); err != nil {
			return fmt.Errorf("parsing %s: %w", dirs[dir], err)
		}
		b := build{
			prefix: outer.prefix + k.NamePrefix, suffix: k.NameSuffix + outer.suffix,
			images: append([][]imageEntry{k.Images}, outer.images...),
		}
		for _, r := range k.Resources {
			p := path.Join(dir, r)
			if _, ok := dirs[p]; ok {
				if err := walk(p, b, depth+1); err != nil {
					return err
				}
				continue
			}
			if _, ok := files[p]; !ok {
				return fmt.Errorf("kustomization %s: resource %s is not in the repository", dirs[dir], r)
			}
			builds[p] = append(builds[p], b)
		}
		return nil
	}
	for _, d := range roots {
		if err := walk(d, build{}, 0); err != nil {
			return nil, nil, err
		}
	}
	return builds, built, nil
}
