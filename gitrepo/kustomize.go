package gitrepo

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/fluxd/fluxd/gitrepo/format/yamledit"
	"github.com/fluxd/fluxd/platform"
)

// kustomizationNames are the file names kustomize looks for in a
// directory, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// KustomizationFile is the kustomization file in dir (absolute), or ""
// when dir holds none.
func KustomizationFile(dir string) string {
	for _, n := range kustomizationNames {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return n
		}
	}
	return ""
}

// kustomizer builds the kustomizations of one clone. It builds from a
// copy of the clone's files in memory, not from the disk: the
// repository's content is not fluxd's to trust, and kustomize on disk
// would follow a base or a symbolic link out of the clone (to /etc, or
// another tenant's files). The copy holds regular files only, each of at
// most MaxFileSize bytes, as ReadFile reads them.
type kustomizer struct {
	fs filesys.FileSystem
	k  *krusty.Kustomizer
}

func newKustomizer(root string) (*kustomizer, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // a link, a device: not copied, so not followed
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := ReadFile(root, rel)
		if err != nil {
			return nil // too big or unreadable: a kustomization naming it reports it missing
		}
		return mem.WriteFile("/"+filepath.ToSlash(rel), b)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the repository for kustomize: %w", err)
	}
	opts := krusty.MakeDefaultOptions() // files under the kustomization's root only, no plugins
	return &kustomizer{fs: mem, k: krusty.MakeKustomizer(opts)}, nil
}

// build runs kustomize on the directory rel (relative to the clone's
// root) and returns the objects it makes, each named by the
// kustomization's file.
func (k *kustomizer) build(rel string) ([]platform.Object, error) {
	dir := path.Clean("/" + filepath.ToSlash(rel)) // "/." for the root is "/"
	file := path.Join(filepath.ToSlash(rel), kustomizationIn(k.fs, dir))
	if err := k.checkLocal(dir, map[string]bool{}); err != nil {
		return nil, err // a Problem naming the file and line
	}
	rm, err := k.k.Run(k.fs, dir)
	if err != nil {
		return nil, Problem{File: file, Err: fmt.Errorf("kustomize build failed: %w", err)}
	}
	var out []platform.Object
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, Problem{File: file, Err: fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)}
		}
		m := map[string]any{}
		if err := utilyaml.Unmarshal(b, &m); err != nil {
			return nil, Problem{File: file, Err: fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)}
		}
		out = append(out, platform.Object{File: file, Manifest: m})
	}
	return out, nil
}

func kustomizationIn(fs filesys.FileSystem, dir string) string {
	for _, n := range kustomizationNames {
		if fs.Exists(path.Join(dir, n)) {
			return n
		}
	}
	return kustomizationNames[0]
}

// buildYAML runs kustomize on rel and returns each resource's YAML.
func (k *kustomizer) buildYAML(rel string) (file string, docs [][]byte, err error) {
	dir := path.Clean("/" + filepath.ToSlash(rel)) // "/." for the root is "/"
	file = path.Join(filepath.ToSlash(rel), kustomizationIn(k.fs, dir))
	if err := k.checkLocal(dir, map[string]bool{}); err != nil {
		return file, nil, err // a Problem naming the file and line
	}
	rm, err := k.k.Run(k.fs, dir)
	if err != nil {
		return file, nil, Problem{File: file, Err: fmt.Errorf("kustomize build failed: %w", err)}
	}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return file, nil, Problem{File: file, Err: fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)}
		}
		docs = append(docs, b)
	}
	return file, docs, nil
}

// kustomizedWorkloads are the workloads a kustomization builds, each
// defined by the kustomization file (Built set, no line).
func (k *kustomizer) workloads(rel string) ([]*Definition, error) {
	file, docs, err := k.buildYAML(rel)
	if err != nil {
		return nil, err
	}
	var out []*Definition
	for _, doc := range docs {
		defs, err := ParseFile(file, doc)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			if d.Format == FormatHelm {
				// A kustomization's images: entries do not reach a
				// HelmRelease's values: it is a service only where its
				// own file can be edited (helm.go).
				if d.Source = k.helmSource(rel, d); d.Source == "" {
					continue
				}
			}
			d.Line, d.Built = 0, true
			if d.Format != FormatHelm {
				// (A HelmRelease's values are edited in its own file,
				// Source: still Helm values.)
				d.Format = FormatKustomize
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// BuiltWorkload returns the YAML of workload id as the kustomization
// file (relative to root) builds it, for applying it.
func BuiltWorkload(root, file string, id platform.ID) ([]byte, error) {
	k, err := newKustomizer(root)
	if err != nil {
		return nil, err
	}
	return k.workload(path.Dir(filepath.ToSlash(file)), id)
}

func (k *kustomizer) workload(rel string, id platform.ID) ([]byte, error) {
	_, docs, err := k.buildYAML(rel)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		if b, err := WorkloadDocument(doc, id); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s: %w in what %s builds", id, platform.ErrNotFound, rel)
}

// SetKustomizeImages returns the kustomization file's content (file,
// relative to root) with its images: entries set so that workload id's
// containers run the given images (container name → image), instead of
// editing the base the kustomization builds from: an entry naming the
// container's current repository gets the new tag (its digest, which
// would override the tag, removed); a repository with no entry gets one.
// A newTag already written is changed in place, byte for byte as the
// image editor does; adding or removing keys re-encodes the file, keeping
// its comments. The result is built again and refused unless the
// workload then runs exactly the new images.
func SetKustomizeImages(root, file string, content []byte, id platform.ID, current map[string]string, images map[string]string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, Problem{File: file, Err: fmt.Errorf("is not a kustomization fluxd can edit (a YAML mapping): %v", err)}
	}
	top := doc.Content[0]
	var edits []yamledit.Edit
	restructure := false
	for container, img := range images {
		cur, ok := current[container]
		if !ok {
			return nil, fmt.Errorf("%s has no container %q: %w", id, container, ErrNoSuchContainer)
		}
		repo, tag := splitImage(img)
		curRepo, _ := splitImage(cur)
		ent := imageEntry(top, curRepo)
		if ent == nil {
			restructure = true
			imgs := lookup(top, "images")
			if imgs == nil {
				top.Content = append(top.Content, scalarNode("images"), &yaml.Node{Kind: yaml.SequenceNode})
				imgs = top.Content[len(top.Content)-1]
			}
			e := &yaml.Node{Kind: yaml.MappingNode}
			e.Content = append(e.Content, scalarNode("name"), scalarNode(curRepo))
			if repo != curRepo {
				e.Content = append(e.Content, scalarNode("newName"), scalarNode(repo))
			}
			e.Content = append(e.Content, scalarNode("newTag"), scalarNode(tag))
			imgs.Content = append(imgs.Content, e)
			continue
		}
		key, val := entry(ent, "newTag")
		_, dig := entry(ent, "digest")
		if key != nil && val.Kind == yaml.ScalarNode && dig == nil && repo == curRepo {
			// Only the tag's bytes change.
			flow := ent.Style&yaml.FlowStyle != 0
			vt, err := yamledit.ValueSpan(content, key, val, yamledit.Context{Flow: flow, Indent: key.Column - 1})
			if err != nil {
				return nil, fmt.Errorf("%s: finding the newTag of %s: %w", file, curRepo, err)
			}
			text, err := yamledit.EncodeImage(tag, val.Style, flow)
			if err != nil {
				return nil, err
			}
			edits = append(edits, yamledit.Edit{Span: vt.Span, Text: vt.Replace(text)})
			val.Value = tag
			continue
		}
		restructure = true
		setEntry(ent, "newTag", tag)
		if repo != curRepo {
			setEntry(ent, "newName", repo)
		}
		removeEntry(ent, "digest")
	}
	var out []byte
	if restructure {
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return nil, fmt.Errorf("%s: writing the kustomization: %w", file, err)
		}
		out = buf.Bytes()
	} else {
		var err error
		if out, err = yamledit.Apply(content, edits); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	if err := verifyKustomizeEdit(root, file, out, id, images); err != nil {
		return nil, err
	}
	return out, nil
}

// verifyKustomizeEdit builds the edited kustomization and checks that the
// workload's containers run the new images.
func verifyKustomizeEdit(root, file string, content []byte, id platform.ID, images map[string]string) error {
	k, err := newKustomizer(root)
	if err != nil {
		return err
	}
	if err := k.fs.WriteFile("/"+filepath.ToSlash(file), content); err != nil {
		return err
	}
	b, err := k.workload(path.Dir(filepath.ToSlash(file)), id)
	if err != nil {
		return fmt.Errorf("the edited %s would not build %s (%w); nothing was changed", file, id, err)
	}
	defs, err := ParseFile(file, b)
	if err != nil || len(defs) != 1 {
		return fmt.Errorf("the edited %s would not build %s; nothing was changed", file, id)
	}
	for _, c := range defs[0].Containers {
		if want, ok := images[c.Name]; ok && c.Image != want {
			return fmt.Errorf("the edited %s would make container %s of %s run %s, not %s (another images: entry or a patch sets it?); nothing was changed", file, c.Name, id, c.Image, want)
		}
	}
	return nil
}

// imageEntry is the images: entry whose image is repo after the
// transformation (newName, else name).
func imageEntry(top *yaml.Node, repo string) *yaml.Node {
	imgs := lookup(top, "images")
	if imgs == nil || imgs.Kind != yaml.SequenceNode {
		return nil
	}
	for _, e := range imgs.Content {
		name := scalar(e, "newName")
		if name == "" {
			name = scalar(e, "name")
		}
		if name == repo {
			return e
		}
	}
	return nil
}

// scalarNode is a string scalar: tagged !!str, so that the encoder
// quotes a tag such as 1.10 that would otherwise read as a number.
func scalarNode(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

func setEntry(m *yaml.Node, k, v string) {
	if _, val := entry(m, k); val != nil {
		val.Kind, val.Value, val.Tag, val.Style = yaml.ScalarNode, v, "!!str", 0
		return
	}
	m.Content = append(m.Content, scalarNode(k), scalarNode(v))
}

func removeEntry(m *yaml.Node, k string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// splitImage splits an image reference into its repository and tag
// (a digest is dropped: releases name tags).
func splitImage(ref string) (repo, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

// IsKustomization reports whether file (a path) is a kustomization file:
// the file of a workload a kustomization builds.
func IsKustomization(file string) bool {
	base := path.Base(filepath.ToSlash(file))
	for _, n := range kustomizationNames {
		if base == n {
			return true
		}
	}
	return false
}
