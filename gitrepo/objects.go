package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fluxd/fluxd/platform"
)

// Objects is every Kubernetes object under the manifest paths, for the
// sync: plain YAML files and kustomize builds alike.
type Objects struct {
	Objects []platform.Object
	// Problems are files, documents or kustomizations that could not be
	// read, with their file and line; the rest are read all the same.
	Problems []error
}

// ReadObjects reads every object under dirs (absolute, inside root): each
// document of every *.yaml, *.yml and *.json file, the items of a List,
// and, for a directory holding a kustomization.yaml, what kustomize builds
// from it (as 'kubectl apply -k' would) instead of its files one by one.
func ReadObjects(root string, dirs []string) (*Objects, error) {
	out, _, err := readObjects(root, dirs, nil)
	return out, err
}

// readObjects is ReadObjects twice in one walk: as the clone holds the
// files (before), and with the files of overlay (relative paths) in place
// of the clone's (after: what a commit of those files would hold; nil
// when overlay is). A file the overlay leaves alone is read once, and its
// objects are shared by both.
func readObjects(root string, dirs []string, overlay map[string][]byte) (before, after *Objects, err error) {
	before = &Objects{}
	if overlay != nil {
		after = &Objects{}
	}
	// The walk lists what to read in order: a kustomization's objects
	// (built as it is met), or a file to parse, parsed after the walk,
	// several at once (parseFiles).
	var parts []readPart
	seen := map[string]bool{}
	var kust, kustAfter *kustomizer
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if seen[path] {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			seen[path] = true
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				if KustomizationFile(path) == "" {
					return nil
				}
				if kust == nil {
					if kust, err = newKustomizer(root); err != nil {
						return err
					}
				}
				var part readPart
				part.before.objs, err = kust.build(rel)
				if err != nil {
					part.before.problems = []error{err}
				}
				if after != nil {
					if kustAfter == nil {
						if kustAfter, err = newKustomizer(root); err != nil {
							return err
						}
						for f, b := range overlay {
							if err := kustAfter.fs.WriteFile("/"+filepath.ToSlash(f), b); err != nil {
								return err
							}
						}
					}
					part.after.objs, err = kustAfter.build(rel)
					if err != nil {
						part.after.problems = []error{err}
					}
				}
				parts = append(parts, part)
				return filepath.SkipDir
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
			default:
				return nil
			}
			parts = append(parts, readPart{file: rel})
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("reading manifests: %w", err)
		}
	}
	parseFiles(root, parts, overlay)
	for _, p := range parts {
		before.Objects = append(before.Objects, p.before.objs...)
		before.Problems = append(before.Problems, p.before.problems...)
		if after != nil {
			after.Objects = append(after.Objects, p.after.objs...)
			after.Problems = append(after.Problems, p.after.problems...)
		}
	}
	return before, after, nil
}

// readPart is one step of readObjects' walk: a kustomization built, or a
// file (file set) to parse, as the clone holds it (before) and with the
// overlay's edit (after).
type readPart struct {
	file          string
	before, after parsed
}

type parsed struct {
	objs     []platform.Object
	problems []error
}

// parseFiles parses the files of parts, as many at once as there are
// CPUs: at 10,000 workloads the YAML parse was most of a sync that found
// nothing changed, one file after the other. Each part's result lands in
// its own slot, so the order of the objects is the walk's.
func parseFiles(root string, parts []readPart, overlay map[string][]byte) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range parts {
		p := &parts[i]
		if p.file == "" {
			continue
		}
		g.Go(func() error {
			if content, err := ReadFile(root, p.file); err != nil {
				p.before.problems = []error{err}
			} else {
				p.before.objs, p.before.problems = ParseObjects(p.file, content)
			}
			if overlay == nil {
				return nil
			}
			p.after = p.before
			if edited, ok := overlay[p.file]; ok {
				p.after.objs, p.after.problems = ParseObjects(p.file, edited)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// ParseObjects returns the objects in one file's content, each with its
// line. A document that is not an object (no apiVersion, kind or name) is
// a problem; the file's other documents are read all the same, unless the
// YAML itself is malformed, past which nothing can be read.
func ParseObjects(file string, content []byte) ([]platform.Object, []error) {
	var objs []platform.Object
	var problems []error
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return objs, problems
		}
		if err != nil {
			return objs, append(problems, Problem{File: file, Line: errorLine(err), Err: fmt.Errorf("malformed YAML: %w", err)})
		}
		if len(d.Content) == 0 || d.Content[0].Kind == yaml.ScalarNode && d.Content[0].Tag == "!!null" {
			continue // an empty document
		}
		root := d.Content[0]
		if root.Kind != yaml.MappingNode {
			problems = append(problems, Problem{File: file, Line: root.Line, Err: errors.New("is not a Kubernetes object (a YAML mapping with apiVersion, kind and metadata.name)")})
			continue
		}
		kind := scalar(root, "kind")
		items := lookup(root, "items")
		if strings.HasSuffix(kind, "List") && items != nil && items.Kind == yaml.SequenceNode {
			itemKind := strings.TrimSuffix(kind, "List")
			for _, it := range items.Content {
				obj, err := toObject(file, it)
				if err != nil {
					problems = append(problems, err)
					continue
				}
				// An item of a typed list may leave its kind and
				// apiVersion out; kubectl takes them from the list.
				if obj.Manifest["kind"] == nil && itemKind != "" {
					obj.Manifest["kind"], obj.Manifest["apiVersion"] = itemKind, scalar(root, "apiVersion")
				}
				if err := checkObject(obj); err != nil {
					problems = append(problems, err)
					continue
				}
				objs = append(objs, obj)
			}
			continue
		}
		obj, err := toObject(file, root)
		if err == nil {
			err = checkObject(obj)
		}
		if err != nil {
			problems = append(problems, err)
			continue
		}
		objs = append(objs, obj)
	}
}

// toObject decodes one YAML node as Kubernetes decodes a manifest (numbers
// as int64 or float64, as unstructured objects want them).
func toObject(file string, n *yaml.Node) (platform.Object, error) {
	// An item of a list may alias an anchor of another item: marshalled
	// alone, the alias would name an anchor it no longer has.
	budget := maxAliasExpansion
	expanded := expandAliases(n, 0, &budget)
	if budget < 0 {
		return platform.Object{}, Problem{File: file, Line: n.Line, Err: fmt.Errorf("its aliases expand to more than %d YAML nodes (an alias bomb?); no manifest needs that many", maxAliasExpansion)}
	}
	if m, ok := fastObject(expanded); ok {
		return platform.Object{File: file, Line: n.Line, Manifest: m}, nil
	}
	m, err := slowObject(expanded)
	if err != nil {
		return platform.Object{}, Problem{File: file, Line: n.Line, Err: err}
	}
	return platform.Object{File: file, Line: n.Line, Manifest: m}, nil
}

// slowObject decodes n as Kubernetes decodes a manifest: written out as
// YAML, read by its YAML library into JSON, and decoded.
func slowObject(n *yaml.Node) (map[string]any, error) {
	b, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := utilyaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("does not decode as a Kubernetes object: %w", err)
	}
	return m, nil
}

// checkObject says what an object lacks to be applied.
func checkObject(o platform.Object) error {
	ref := o.Ref()
	var missing []string
	if ref.APIVersion == "" {
		missing = append(missing, "apiVersion")
	}
	if ref.Kind == "" {
		missing = append(missing, "kind")
	}
	if ref.Name == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return Problem{File: o.File, Line: o.Line, Err: fmt.Errorf("is not a Kubernetes object: it has no %s", strings.Join(missing, ", "))}
	}
	return nil
}

// maxAliasExpansion bounds the nodes expandAliases copies for one object:
// each level of aliases naming the one before twice doubles them, so a
// file of a few hundred bytes could otherwise expand past memory, under
// the locks every release waits for. yaml.v3's decoder refuses such
// documents the same way ("excessive aliasing").
const maxAliasExpansion = 100_000

// expandAliases returns n with every alias replaced by a copy of what it
// names (n itself when it holds none), as a decoder reads it. It stops
// copying, leaving *budget negative, once it has copied *budget nodes.
func expandAliases(n *yaml.Node, depth int, budget *int) *yaml.Node {
	if n == nil || depth > 100 || *budget < 0 {
		return n
	}
	if !hasAlias(n, 0) {
		// Shared, not copied, but written out once more per reference:
		// it counts as many times.
		spend(n, budget)
		return n
	}
	if n.Kind == yaml.AliasNode {
		return expandAliases(n.Alias, depth+1, budget)
	}
	*budget -= len(n.Content) + 1
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = expandAliases(x, depth+1, budget)
	}
	return &c
}

// spend takes n's nodes from *budget, stopping once it is negative.
func spend(n *yaml.Node, budget *int) {
	*budget--
	for _, x := range n.Content {
		if *budget < 0 {
			return
		}
		spend(x, budget)
	}
}

func hasAlias(n *yaml.Node, depth int) bool {
	if n == nil || depth > 100 {
		return false
	}
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, x := range n.Content {
		if hasAlias(x, depth+1) {
			return true
		}
	}
	return false
}
