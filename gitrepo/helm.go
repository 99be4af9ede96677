package gitrepo

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/gitrepo/format/yamledit"
	"github.com/fluxd/fluxd/helmrelease"
	"github.com/fluxd/fluxd/platform"
)

// A HelmRelease's containers are the images in its spec.values
// (helmrelease.Find), and a release writes the new image into the fields
// that hold it, in the form they have: only the bytes of those values
// change, as for a Deployment's image.

// helmAnnotations are a HelmRelease object's metadata.annotations.
func helmAnnotations(obj *yaml.Node) map[string]string {
	out := map[string]string{}
	if ann := lookup(obj, "metadata", "annotations"); ann != nil && ann.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(ann.Content); i += 2 {
			out[ann.Content[i].Value] = ann.Content[i+1].Value
		}
	}
	return out
}

// helmImages are the images in a HelmRelease object's spec.values.
func helmImages(obj *yaml.Node) ([]helmrelease.Image, []string) {
	return helmrelease.Find(helmAnnotations(obj), lookup(obj, "spec", "values"))
}

// helmContainers are a HelmRelease object's images as containers.
func helmContainers(obj *yaml.Node) ([]Container, []string) {
	imgs, warnings := helmImages(obj)
	var out []Container
	for _, img := range imgs {
		out = append(out, Container{Name: img.Name, Image: img.Ref})
	}
	return out, warnings
}

// helmEdits are the edits that set the images of HelmRelease w in
// content (SetImages), and the values the decoded object must then hold,
// by path under spec.values. A field reached through a YAML alias is
// edited where its anchor is defined, once, and only when every use of
// the anchor agrees (helmrelease.Assignments).
func helmEdits(content []byte, w workload, id platform.ID, changes map[string]ImageChange) ([]yamledit.Edit, map[string]helmValue, error) {
	imgs, _ := helmImages(w.obj)
	to := map[string]string{}
	for _, img := range imgs {
		ch, ok := changes[img.Name]
		if !ok {
			continue
		}
		if img.Ref != ch.From {
			return nil, nil, &ConflictError{ID: id, What: fmt.Sprintf("container %s's image", img.Name), Want: ch.From, Got: img.Ref}
		}
		to[img.Name] = ch.To
	}
	for name := range changes {
		if _, ok := to[name]; !ok {
			return nil, nil, fmt.Errorf("%s has no container %q (no image of that name in spec.values): %w", id, name, ErrNoSuchContainer)
		}
	}
	assigns, err := helmrelease.Assignments(imgs, to)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", id, err)
	}
	var edits []yamledit.Edit
	values := map[string]helmValue{}
	for _, a := range assigns {
		if a.Value == a.Field.Value.Value {
			continue
		}
		path := strings.Join(a.Field.Def, ".")
		flow := a.Field.Flow
		vt, err := yamledit.ValueSpan(content, a.Field.Key, a.Field.Value, yamledit.Context{Flow: flow, Indent: a.Field.Key.Column - 1})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: finding spec.values.%s: %w", id, path, err)
		}
		text, err := yamledit.EncodeImage(a.Value, a.Field.Value.Style, flow)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: spec.values.%s: %w", id, path, err)
		}
		edits = append(edits, yamledit.Edit{Span: vt.Span, Text: vt.Replace(text)})
		for _, use := range a.Field.Uses {
			values[strings.Join(use, ".")] = helmValue{use, a.Value}
		}
	}
	return edits, values, nil
}

// helmValue is one string to set under spec.values.
type helmValue struct {
	path  []string
	value string
}

// setHelmValues is helmEdits on a decoded object, for verifyEdit.
func setHelmValues(obj map[string]any, values map[string]helmValue) error {
	spec, _ := get(obj, "spec").(map[string]any)
	vals, _ := get(spec, "values").(map[string]any)
	if vals == nil {
		return fmt.Errorf("spec.values is not a mapping of strings")
	}
	for _, v := range values {
		if err := helmrelease.Set(vals, v.path, v.value); err != nil {
			return err
		}
	}
	return nil
}

// SetHelmImages is SetImages for HelmRelease id: the images its
// spec.values make, written in the fields and form they have there.
func SetHelmImages(content []byte, id platform.ID, changes map[string]ImageChange) ([]byte, error) {
	w, err := findWorkload(content, id)
	if err != nil {
		return nil, err
	}
	return setHelmImages(content, w, id, changes)
}

// setHelmImages is SetImages for a HelmRelease.
func setHelmImages(content []byte, w workload, id platform.ID, changes map[string]ImageChange) ([]byte, error) {
	edits, values, err := helmEdits(content, w, id, changes)
	if err != nil {
		return nil, err
	}
	out, err := yamledit.Apply(content, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	err = verifyEdit(content, out, w, func(want, _ map[string]any) error {
		return setHelmValues(want, values)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: setting images in spec.values: %w", id, err)
	}
	return out, nil
}

// applyHelm is a planned image change made to a rendered HelmRelease, for
// CheckRender: the rules that found the container set its fields.
func applyHelm(obj map[string]any, c Change) error {
	spec, _ := obj["spec"].(map[string]any)
	vals, _ := spec["values"].(map[string]any)
	ann := map[string]string{}
	if md, ok := obj["metadata"].(map[string]any); ok {
		if a, ok := md["annotations"].(map[string]any); ok {
			for k, v := range a {
				ann[k] = fmt.Sprint(v)
			}
		}
	}
	imgs, _, err := helmrelease.FindIn(ann, vals)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if img.Name != c.Container {
			continue
		}
		if img.Ref != c.From {
			return fmt.Errorf("container %s runs %s at the parent commit, not %s as planned", c.Container, img.Ref, c.From)
		}
		assigns, err := img.Split(c.To)
		if err != nil {
			return err
		}
		for _, a := range assigns {
			if err := helmrelease.Set(vals, a.Field.Path, a.Value); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("has no container %s in spec.values at the parent commit, although the plan changes it", c.Container)
}

// helmSource is the file that holds HelmRelease d, which the
// kustomization in directory rel builds: a file of that directory (not a
// base) holding a HelmRelease of the same namespace and name, whose
// values make the same images as built (no patch, namespace:, namePrefix
// or nameSuffix of the kustomization changed them). "" when there is no
// such file, or more than one: then the HelmRelease is not a service,
// as before.
func (k *kustomizer) helmSource(rel string, d *Definition) string {
	dir := "/" + strings.TrimPrefix(path.Clean("/"+rel), "/")
	entries, err := k.fs.ReadDir(dir)
	if err != nil {
		return ""
	}
	found := ""
	for _, name := range entries {
		ext := path.Ext(name)
		if ext != ".yaml" && ext != ".yml" || slices.Contains(konfig.RecognizedKustomizationFileNames(), name) {
			continue
		}
		file := strings.TrimPrefix(path.Join(dir, name), "/")
		b, err := k.fs.ReadFile("/" + file)
		if err != nil {
			continue
		}
		defs, err := ParseFile(file, b)
		if err != nil {
			continue
		}
		for _, src := range defs {
			if src.ID != d.ID {
				continue
			}
			if found != "" || !slices.Equal(src.Containers, d.Containers) {
				return ""
			}
			found = file
		}
	}
	return found
}
