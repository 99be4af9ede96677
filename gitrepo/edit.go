package gitrepo

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/gitrepo/format/yamledit"
	"github.com/fluxd/fluxd/platform"
)

// ErrNoSuchContainer is returned when an edit names a container the
// workload does not have.
var ErrNoSuchContainer = errors.New("no such container")

// ErrMoved is wrapped by errors saying the remote branch moved since it
// was read: someone else pushed.
var ErrMoved = errors.New("the remote branch moved")

// ErrConflict is wrapped by errors saying git holds something else than
// the value an edit expects to replace: someone changed it since the plan
// was made. The edit is refused, never made over their change.
var ErrConflict = errors.New("git holds another value than the one the edit expects to replace")

// ConflictError is an edit refused because git holds Got where it
// expected Want.
type ConflictError struct {
	ID platform.ID
	// What is being replaced: "container app's image", "annotation k".
	What      string
	Want, Got string
}

func (e *ConflictError) Error() string {
	got := e.Got
	if got == "" {
		got = "nothing"
	}
	return fmt.Sprintf("%s: %s is %s in git, not %s as planned; someone changed it since the plan was made, so it is left as it is", e.ID, e.What, got, e.Want)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// ImageChange is one container's image edit: From is the image the
// container must have in git now (compare-and-swap), To the new one.
type ImageChange struct{ From, To string }

// Signature is the author of a commit.
type Signature struct{ Name, Email string }

// SetImages returns content with the images of workload id's containers
// replaced: images maps a container name to its change. Each change names
// the image it replaces; if the container has another one, the edit is
// refused with a ConflictError (wrapping ErrConflict). Only the bytes
// of each image value change, written in the quoting the old value had
// where the new one allows it; everything else in the file, other
// documents included, stays byte for byte as it was. The result is read
// back and refused unless exactly those images changed.
func SetImages(content []byte, id platform.ID, changes map[string]ImageChange) ([]byte, error) {
	w, err := findWorkload(content, id)
	if err != nil {
		return nil, err
	}
	if KindFormat(id.Kind) == FormatHelm {
		return setHelmImages(content, w, id, changes) // (SetHelmImages)
	}
	var edits []yamledit.Edit
	done := map[string]bool{}
	images := map[string]string{}
	for _, c := range containerNodes(w.obj, id.Kind) {
		ch, ok := changes[c.name]
		if !ok {
			continue
		}
		if c.image.Value != ch.From {
			return nil, &ConflictError{ID: id, What: fmt.Sprintf("container %s's image", c.name), Want: ch.From, Got: c.image.Value}
		}
		img := ch.To
		images[c.name] = img
		vt, err := yamledit.ValueSpan(content, c.key, c.image, yamledit.Context{Flow: c.flow, Indent: c.key.Column - 1})
		if err != nil {
			return nil, fmt.Errorf("%s: container %s: finding its image: %w", id, c.name, err)
		}
		text, err := yamledit.EncodeImage(img, c.image.Style, c.flow)
		if err != nil {
			return nil, fmt.Errorf("%s: container %s: %w", id, c.name, err)
		}
		edits = append(edits, yamledit.Edit{Span: vt.Span, Text: vt.Replace(text)})
		done[c.name] = true
	}
	for name := range changes {
		if !done[name] {
			return nil, fmt.Errorf("%s has no container %q: %w", id, name, ErrNoSuchContainer)
		}
	}
	out, err := yamledit.Apply(content, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	err = verifyEdit(content, out, w, func(want, _ map[string]any) error {
		return setImages(want, id.Kind, images)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: setting images: %w", id, err)
	}
	return out, nil
}

// setImages is SetImages on a decoded object, for verifyEdit.
func setImages(obj map[string]any, kind string, images map[string]string) error {
	path := []string{"spec", "template", "spec"}
	if kind == "cronjob" {
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	var pod any = obj
	for _, k := range path {
		pod = get(pod, k)
	}
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := get(pod, key).([]any)
		for _, c := range list {
			name, _ := get(c, "name").(string)
			img, ok := images[name]
			if !ok {
				continue
			}
			// A mapping with a key that is not a string decodes as
			// map[any]any.
			switch c := c.(type) {
			case map[string]any:
				if _, has := c["image"]; has {
					c["image"] = img
				}
			case map[any]any:
				if _, has := c["image"]; has {
					c["image"] = img
				}
			}
		}
	}
	return nil
}

// findWorkload is workload id in content; defined twice, it is refused,
// since fluxd cannot know which definition to edit.
func findWorkload(content []byte, id platform.ID) (workload, error) {
	var found []workload
	err := eachWorkload(content, func(w workload) error {
		if w.id == id {
			found = append(found, w)
		}
		return nil
	})
	switch {
	case err != nil:
		return workload{}, err
	case len(found) == 0:
		return workload{}, fmt.Errorf("%s: %w", id, platform.ErrNotFound)
	case len(found) > 1:
		return workload{}, &DuplicateError{ID: id, First: fmt.Sprintf("line %d", found[0].obj.Line), Second: fmt.Sprintf("line %d", found[1].obj.Line)}
	}
	return found[0], nil
}

// WorkloadDocument returns the YAML of workload id's object alone, from a
// file that may hold many documents or a List, for applying it. An item of
// a typed list that leaves out its kind and apiVersion gets the list's.
func WorkloadDocument(content []byte, id platform.ID) ([]byte, error) {
	var out []byte
	err := eachWorkload(content, func(w workload) error {
		if w.id != id || out != nil {
			return nil
		}
		obj := w.obj
		if w.kind != "" {
			copied := *obj
			copied.Content = append([]*yaml.Node{
				{Kind: yaml.ScalarNode, Value: "apiVersion"}, {Kind: yaml.ScalarNode, Value: w.apiVersion},
				{Kind: yaml.ScalarNode, Value: "kind"}, {Kind: yaml.ScalarNode, Value: w.kind},
			}, obj.Content...)
			obj = &copied
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		out = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("%s: %w", id, platform.ErrNotFound)
	}
	return out, nil
}
