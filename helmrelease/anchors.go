package helmrelease

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAML anchors and aliases. Helm reads an alias (image: *a) or a merge
// (<<: *a) as a copy of the anchored node, so an image reached through
// one is written where its anchor is defined, and that one edit changes
// every alias of the anchor. fluxd makes it only when every alias agrees:
// each alias is a field of a container the release moves, to the same
// value (Assignments). The anchor itself (version: &v "1.4") changes
// with them: that is what the author wrote it for.

// maxVisits bounds the nodes indexValues visits: aliases make a small
// file a large tree ("billion laughs"), and values are read on every sync.
const maxVisits = 100000

// index is where each scalar of values is defined and used.
type index struct {
	def    map[*yaml.Node]site
	uses   map[*yaml.Node][][]string
	visits int
}

// site is where a node is written: the key of its entry, its path, and
// whether it sits in a flow collection.
type site struct {
	key  *yaml.Node
	path []string
	flow bool
}

// indexValues visits values (nil for none), following aliases.
func indexValues(values *yaml.Node) *index {
	idx := &index{def: map[*yaml.Node]site{}, uses: map[*yaml.Node][][]string{}}
	if values != nil {
		idx.visit(nil, values, nil, false, false, 0)
	}
	return idx
}

// visit records n (the value of key at path; aliased says it was reached
// through an alias) and what it holds.
func (idx *index) visit(key, n *yaml.Node, path []string, flow, aliased bool, depth int) {
	idx.visits++
	if n == nil || depth > maxDepth || idx.visits > maxVisits {
		return
	}
	if n.Kind == yaml.AliasNode {
		idx.visit(key, resolve(n), path, flow, true, depth+1)
		return
	}
	flow = flow || n.Style&yaml.FlowStyle != 0
	if !aliased {
		if _, ok := idx.def[n]; !ok {
			idx.def[n] = site{key: key, path: path, flow: flow}
		}
	}
	switch n.Kind {
	case yaml.ScalarNode:
		idx.uses[n] = append(idx.uses[n], path)
	case yaml.MappingNode:
		// A merged entry is visited twice: where its anchor is defined
		// (not aliased) and here, through the merge (aliased).
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0 {
				continue
			}
			idx.visit(k, v, append(path[:len(path):len(path)], k.Value), flow, aliased, depth+1)
		}
		all, own := entries(n), 0
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind != yaml.ScalarNode || k.Value != "<<" || k.Style != 0 {
				own++
			}
		}
		for _, e := range all[min(own, len(all)):] {
			idx.visit(e.key, e.value, append(path[:len(path):len(path)], e.key.Value), flow, true, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			idx.visit(nil, item, append(path[:len(path):len(path)], strconv.Itoa(i)), flow, aliased, depth+1)
		}
	}
}

// place sets f's definition site and uses.
func (idx *index) place(f *Field) {
	f.Uses = idx.uses[f.Value]
	if len(f.Uses) == 0 {
		f.Uses = [][]string{f.Path}
	}
	d, ok := idx.def[f.Value]
	if !ok || d.key == nil {
		f.Def = nil
		return
	}
	f.Def, f.Key, f.Flow = d.path, d.key, d.flow
}

// Assignments are what to write so that each container of changes
// (container name → new image) runs its image: one Assign per field
// written, a field shared through an anchor once. It refuses a change
// that would give a shared field two values, or would change an alias
// of the anchor that no changed container agrees to, naming both paths.
func Assignments(imgs []Image, changes map[string]string) ([]Assign, error) {
	var out []Assign
	type claim struct {
		value, container string
		path             []string
	}
	claims := map[*yaml.Node][]claim{}
	names := make([]string, 0, len(changes))
	for name := range changes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		i := slices.IndexFunc(imgs, func(img Image) bool { return img.Name == name })
		if i < 0 {
			continue // the caller says the container does not exist
		}
		assigns, err := imgs[i].Split(changes[name])
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", name, err)
		}
		for _, a := range assigns {
			n := a.Field.Value
			prior := claims[n]
			for _, c := range prior {
				if c.value != a.Value {
					return nil, fmt.Errorf("values.%s and values.%s are one value, through a YAML anchor (defined at %s): container %s wants %q there and container %s wants %q, so neither is written; release both to the same image, or give each its own value in git",
						dotted(c.path), dotted(a.Field.Path), defined(a.Field), c.container, c.value, name, a.Value)
				}
			}
			claims[n] = append(prior, claim{a.Value, name, a.Field.Path})
			if len(prior) == 0 {
				out = append(out, a)
			}
		}
	}
	for _, a := range out {
		f := a.Field
		if a.Value == f.Value.Value {
			continue
		}
		if f.Def == nil {
			return nil, fmt.Errorf("container %s: values.%s is an alias of an anchor defined outside spec.values, which fluxd does not edit; write the value in spec.values", claims[f.Value][0].container, dotted(f.Path))
		}
		for _, use := range f.Uses {
			if slices.Equal(use, f.Def) {
				continue // the anchor itself: where the edit is made
			}
			agreed := slices.ContainsFunc(claims[f.Value], func(c claim) bool { return slices.Equal(c.path, use) })
			if !agreed {
				c := claims[f.Value][0]
				return nil, fmt.Errorf("values.%s is also values.%s, through a YAML anchor (defined at %s): setting container %s to %q there would change values.%s too, which no container of this release agrees to; release every container that uses the anchor to the same image, or give %s its own value in git",
					dotted(c.path), dotted(use), defined(f), c.container, c.value, dotted(use), c.container)
			}
		}
	}
	return out, nil
}

func dotted(path []string) string { return strings.Join(path, ".") }

// defined names where f's anchor is defined.
func defined(f *Field) string {
	if f.Def == nil {
		return "outside spec.values"
	}
	if f.Value.Anchor != "" {
		return fmt.Sprintf("values.%s, &%s", dotted(f.Def), f.Value.Anchor)
	}
	return "values." + dotted(f.Def)
}
