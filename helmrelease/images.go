package helmrelease

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/registry"
)

// ChartImage is the container name of the image at the top level of
// values (values.image), as Flux v1 named it.
const ChartImage = "chart-image"

// Flux v1's annotations that map a container's image parts to paths in
// values: repository.fluxcd.io/<container>: path.to.repository, and
// likewise the tag and the registry (both optional).
const (
	RepositoryPrefix = "repository.fluxcd.io/"
	TagPrefix        = "tag.fluxcd.io/"
	RegistryPrefix   = "registry.fluxcd.io/"
)

// maxDepth bounds how deep in values images are looked for; charts nest
// a handful of levels, and a hostile file must not cost a deep walk.
const maxDepth = 32

// maxWalk bounds the mappings and list items walked for images: YAML
// aliases make a small file a large tree ("billion laughs").
const maxWalk = 10000

// Field is one scalar of values holding a part of an image.
type Field struct {
	// Path is the keys from spec.values to the scalar.
	Path []string
	// Key and Value are the scalar's mapping entry.
	Key, Value *yaml.Node
	// Flow says the entry is inside a flow collection ({...}), where a
	// plain value must not hold ",[]{}".
	Flow bool
	// Def is the path where Value is written in the file: Path itself,
	// unless Value is reached through a YAML alias (image: *a, or a
	// merge <<: *a), when it is where the anchor &a is defined; nil when
	// the anchor is defined outside spec.values. Key and Flow are then
	// the definition's.
	Def []string
	// Uses are every path of spec.values at which Value appears (Path
	// and each alias of its anchor): editing Value changes them all.
	Uses [][]string
}

// Image is one image found in values, a "container" of the HelmRelease.
type Image struct {
	// Name is the container name (ChartImage, a key, or dotted keys).
	Name string
	// Ref is the image as its parts compose it, registry/repository:tag.
	Ref string
	// Image is set for the string form (image: repo[:tag]); Repository,
	// with Registry and Tag when the form has them, for the mapping form
	// and the mapped annotations. Tag may also go with Image (image: repo
	// beside tag: 1.2).
	Image, Registry, Repository, Tag *Field
	// Mapped says the annotations named the paths.
	Mapped bool
}

// Fields are the image's fields, in the order Split assigns them.
func (img Image) Fields() []*Field {
	var out []*Field
	for _, f := range []*Field{img.Image, img.Registry, img.Repository, img.Tag} {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}

// Find returns the images in values (the spec.values node; nil for none),
// sorted by name, and warnings about annotations that point at nothing
// usable. annotations are the HelmRelease's metadata.annotations as
// written.
func Find(annotations map[string]string, values *yaml.Node) ([]Image, []string) {
	var warnings []string
	claimed := map[*yaml.Node]bool{}
	byName := map[string]Image{}
	for _, name := range mappedNames(annotations) {
		img, err := mapped(annotations, name, values)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("container %s: %v", name, err))
			continue
		}
		byName[name] = img
		for _, f := range img.Fields() {
			claimed[f.Value] = true
		}
	}
	if values != nil && values.Kind == yaml.MappingNode {
		budget := maxWalk
		walk(values, nil, values.Style&yaml.FlowStyle != 0, &budget, func(img Image) {
			for _, f := range img.Fields() {
				if claimed[f.Value] {
					return // the annotations name it already
				}
			}
			if _, dup := byName[img.Name]; dup {
				warnings = append(warnings, fmt.Sprintf("two images in values are both named %s; only the first is managed", img.Name))
				return
			}
			byName[img.Name] = img
		})
		if budget < 0 {
			return nil, append(warnings, fmt.Sprintf("spec.values holds more than %d mappings and lists once its YAML aliases are expanded, so fluxd reads no image in it (a file written to blow up, or values to split)", maxWalk))
		}
	}
	idx := indexValues(values)
	out := make([]Image, 0, len(byName))
	for _, img := range byName {
		for _, f := range img.Fields() {
			idx.place(f)
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, warnings
}

// walk calls fn for every mapping under m (at path) that holds an image,
// in document order, depth first: under mappings, in lists (an item's
// path element is its index), and through YAML aliases and merge keys
// (<<), which Helm reads as copies of the anchored node.
func walk(m *yaml.Node, path []string, flow bool, budget *int, fn func(Image)) {
	if *budget--; *budget < 0 || len(path) > maxDepth {
		return
	}
	name := strings.Join(path, ".")
	if len(path) == 0 {
		name = ChartImage
	}
	if img, ok := container(m, path, flow); ok {
		img.Name = name
		fn(img)
	}
	for _, e := range entries(m) {
		if e.key.Kind != yaml.ScalarNode || e.key.Value == "image" {
			continue
		}
		descend(e.value, append(path[:len(path):len(path)], e.key.Value), flow, budget, fn)
	}
}

// descend walks v, a value at path, if it is (or aliases) a mapping or a
// list.
func descend(v *yaml.Node, path []string, flow bool, budget *int, fn func(Image)) {
	v = resolve(v)
	if v == nil || *budget < 0 || len(path) > maxDepth {
		return
	}
	flow = flow || v.Style&yaml.FlowStyle != 0
	switch v.Kind {
	case yaml.MappingNode:
		walk(v, path, flow, budget, fn)
	case yaml.SequenceNode:
		for i, item := range v.Content {
			*budget--
			descend(item, append(path[:len(path):len(path)], strconv.Itoa(i)), flow, budget, fn)
		}
	}
}

// container reads the image of mapping m (at path), Flux v1's
// interpretAsContainer: its image entry is a string (with an optional
// sibling tag) or a mapping with a repository.
func container(m *yaml.Node, path []string, flow bool) (Image, bool) {
	key, v := entry(m, "image")
	if v == nil {
		return Image{}, false
	}
	at := func(k string) []string { return append(path[:len(path):len(path)], k) }
	switch {
	case str(v):
		img := Image{Image: &Field{Path: at("image"), Key: key, Value: v, Flow: flow}, Ref: v.Value}
		if tk, tv := entry(m, "tag"); tv != nil && str(tv) {
			img.Tag = &Field{Path: at("tag"), Key: tk, Value: tv, Flow: flow}
			img.Ref = v.Value + ":" + tv.Value
		}
		return img, valid(img.Ref)
	case v.Kind == yaml.MappingNode:
		img := Image{}
		flow := flow || v.Style&yaml.FlowStyle != 0
		rk, rv := entry(v, "repository")
		if rv == nil || !str(rv) {
			return Image{}, false
		}
		sub := at("image")
		img.Repository = &Field{Path: append(sub[:len(sub):len(sub)], "repository"), Key: rk, Value: rv, Flow: flow}
		if gk, gv := entry(v, "registry"); gv != nil && str(gv) {
			img.Registry = &Field{Path: append(sub[:len(sub):len(sub)], "registry"), Key: gk, Value: gv, Flow: flow}
		}
		if tk, tv := entry(v, "tag"); tv != nil && str(tv) {
			img.Tag = &Field{Path: append(sub[:len(sub):len(sub)], "tag"), Key: tk, Value: tv, Flow: flow}
		}
		img.Ref = compose(img)
		return img, valid(img.Ref)
	}
	return Image{}, false
}

// mappedNames are the container names the repository annotations give,
// sorted.
func mappedNames(annotations map[string]string) []string {
	var out []string
	for k := range annotations {
		if name, ok := strings.CutPrefix(k, RepositoryPrefix); ok && name != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// mapped is container name as the annotations map it.
func mapped(annotations map[string]string, name string, values *yaml.Node) (Image, error) {
	img := Image{Name: name, Mapped: true}
	for _, part := range []struct {
		prefix   string
		field    **Field
		required bool
	}{{RepositoryPrefix, &img.Repository, true}, {RegistryPrefix, &img.Registry, false}, {TagPrefix, &img.Tag, false}} {
		p, ok := annotations[part.prefix+name]
		if !ok {
			continue
		}
		f, err := field(values, p)
		if err != nil {
			return Image{}, fmt.Errorf("%s%s: %w", part.prefix, name, err)
		}
		*part.field = f
	}
	img.Ref = compose(img)
	if !valid(img.Ref) {
		return Image{}, fmt.Errorf("the values it points at make %q, which is not an image reference", img.Ref)
	}
	return img, nil
}

// field is the string scalar at the dotted path p of values.
func field(values *yaml.Node, p string) (*Field, error) {
	keys := strings.Split(p, ".")
	var key *yaml.Node
	n := values
	flow := false
	for i, k := range keys {
		flow = flow || n != nil && n.Style&yaml.FlowStyle != 0
		if k == "" {
			return nil, fmt.Errorf("path %q has an empty key", p)
		}
		key, n = entry(n, k)
		if n == nil {
			return nil, fmt.Errorf("spec.values has no %s", strings.Join(keys[:i+1], "."))
		}
	}
	if !str(n) {
		return nil, fmt.Errorf("spec.values.%s is not a string", p)
	}
	return &Field{Path: keys, Key: key, Value: n, Flow: flow}, nil
}

// compose is the image reference the parts of a mapping form make.
func compose(img Image) string {
	ref := img.Repository.Value.Value
	if img.Registry != nil && img.Registry.Value.Value != "" {
		ref = strings.TrimSuffix(img.Registry.Value.Value, "/") + "/" + ref
	}
	if img.Tag != nil {
		ref += ":" + img.Tag.Value.Value
	}
	return ref
}

// Assign is a new value for one field.
type Assign struct {
	Field *Field
	Value string
}

// Split says what to write in the image's fields so that they compose
// ref, keeping the image's form: a tag field gets the tag, a registry
// field the registry, as Flux v1's helm-operator wrote them.
func (img Image) Split(ref string) ([]Assign, error) {
	if !valid(ref) {
		return nil, fmt.Errorf("%q is not an image reference", ref)
	}
	domain, rest, tag := splitRef(ref)
	name := rest
	if domain != "" {
		name = domain + "/" + rest
	}
	if img.Tag != nil && (tag == "" || strings.HasPrefix(tag, "@")) {
		return nil, fmt.Errorf("%s has no tag, and container %s keeps its tag apart (values.%s)", ref, img.Name, strings.Join(img.Tag.Path, "."))
	}
	withTag := func(s string) string {
		if tag == "" {
			return s
		}
		if strings.HasPrefix(tag, "@") {
			return s + tag
		}
		return s + ":" + tag
	}
	var out []Assign
	switch {
	case img.Image != nil && img.Tag != nil:
		out = append(out, Assign{img.Image, name}, Assign{img.Tag, tag})
	case img.Image != nil:
		out = append(out, Assign{img.Image, ref})
	case img.Registry != nil:
		reg := domain
		if old := strings.TrimSuffix(img.Registry.Value.Value, "/"); old != "" && strings.HasPrefix(name, old+"/") {
			reg, rest = old, strings.TrimPrefix(name, old+"/")
		}
		// An image that names no registry leaves the field empty, so
		// that the values compose exactly ref again (charts write no
		// registry then, as Flux v1 did).
		out = append(out, Assign{img.Registry, reg})
		if img.Tag != nil {
			out = append(out, Assign{img.Repository, rest}, Assign{img.Tag, tag})
		} else {
			out = append(out, Assign{img.Repository, withTag(rest)})
		}
	case img.Tag != nil:
		out = append(out, Assign{img.Repository, name}, Assign{img.Tag, tag})
	default:
		out = append(out, Assign{img.Repository, ref})
	}
	return out, nil
}

// splitRef splits an image reference into its registry host (empty when
// it names none), the rest of its name, and its tag ("" for none; a
// digest is "@sha256:..." appended to it, and a tag of its own).
func splitRef(ref string) (domain, rest, tag string) {
	name, digest, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	if digest != "" {
		tag += "@" + digest
	}
	if first, after, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first, after, tag
	}
	return "", name, tag
}

// valid says whether ref is an image reference fluxd can release.
func valid(ref string) bool {
	_, err := registry.ParseRef(ref)
	return err == nil && ref != "" && !strings.ContainsAny(ref, " \t\n")
}

// str says whether n is a scalar YAML reads as a string.
func str(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

// entry is the key and value of mapping n's entry k; nils if none. An
// entry written in n wins over one merged into it (<<: *a), as YAML
// says; a value that is an alias is resolved to its anchored node.
func entry(n *yaml.Node, k string) (key, value *yaml.Node) {
	for _, e := range entries(n) {
		if e.key.Kind == yaml.ScalarNode && e.key.Value == k {
			return e.key, resolve(e.value)
		}
	}
	return nil, nil
}

// kv is one mapping entry.
type kv struct{ key, value *yaml.Node }

// entries are mapping n's entries with its merge keys expanded: its own
// first, then each merged mapping's that n does not already have, in the
// order the merge lists them. nil for what is not a mapping.
func entries(n *yaml.Node) []kv {
	return mergedEntries(resolve(n), 0)
}

func mergedEntries(n *yaml.Node, depth int) []kv {
	if n == nil || n.Kind != yaml.MappingNode || depth > maxDepth {
		return nil
	}
	var own, merged []kv
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0 {
			src := resolve(v)
			if src != nil && src.Kind == yaml.SequenceNode {
				for _, s := range src.Content {
					merged = append(merged, mergedEntries(resolve(s), depth+1)...)
				}
			} else {
				merged = append(merged, mergedEntries(src, depth+1)...)
			}
			continue
		}
		own = append(own, kv{k, v})
		seen[k.Value] = true
	}
	for _, e := range merged {
		if !seen[e.key.Value] {
			seen[e.key.Value] = true
			own = append(own, e)
		}
	}
	return own
}

// resolve is n, or the node its alias names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}
