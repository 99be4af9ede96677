package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/platform"
)

// ErrNoSuchContainer is returned when an edit names a container the
// workload does not have.
var ErrNoSuchContainer = errors.New("no such container")

// SetImages returns content with the images of workload id's containers
// replaced: images maps a container name to its new image. Only the bytes
// of each image value change; everything else in the file, other documents
// included, stays byte for byte as it was.
func SetImages(content []byte, id platform.ID, images map[string]string) ([]byte, error) {
	type span struct {
		start, end int
		text       string
	}
	var spans []span
	found := false
	done := map[string]bool{}
	err := eachWorkload(content, func(obj *yaml.Node, got platform.ID, _ int) error {
		if got != id {
			return nil
		}
		found = true
		for _, c := range containerNodes(obj, id.Kind) {
			img, ok := images[c.name]
			if !ok {
				continue
			}
			start, end, err := scalarSpan(content, c.image)
			if err != nil {
				return fmt.Errorf("container %s: %w", c.name, err)
			}
			spans = append(spans, span{start, end, quote(img, c.image.Style)})
			done[c.name] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", id, platform.ErrNotFound)
	}
	for name := range images {
		if !done[name] {
			return nil, fmt.Errorf("%s has no container %q: %w", id, name, ErrNoSuchContainer)
		}
	}
	// Replace from the end, so earlier offsets stay valid.
	sort.Slice(spans, func(i, j int) bool { return spans[i].start > spans[j].start })
	out := bytes.Clone(content)
	for _, s := range spans {
		out = append(out[:s.start], append([]byte(s.text), out[s.end:]...)...)
	}
	return out, nil
}

// scalarSpan finds the bytes of a scalar node in content from its line
// and column (yaml.v3 counts columns in characters), and checks that they
// are what the node says, so an edit never lands anywhere else.
func scalarSpan(content []byte, n *yaml.Node) (int, int, error) {
	off, line := 0, 1
	for line < n.Line {
		i := bytes.IndexByte(content[off:], '\n')
		if i < 0 {
			return 0, 0, fmt.Errorf("line %d is past the end of the file", n.Line)
		}
		off += i + 1
		line++
	}
	for col := 1; col < n.Column; col++ {
		_, size := utf8.DecodeRune(content[off:])
		if size == 0 {
			return 0, 0, fmt.Errorf("column %d is past the end of line %d", n.Column, n.Line)
		}
		off += size
	}
	want := quote(n.Value, n.Style)
	if !bytes.HasPrefix(content[off:], []byte(want)) {
		return 0, 0, fmt.Errorf("line %d: the image value is written in a form fluxd cannot edit safely (escapes or a multi-line scalar); write it on one line, plain or simply quoted", n.Line)
	}
	return off, off + len(want), nil
}

// quote writes v as a scalar in the given style.
func quote(v string, style yaml.Style) string {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return `"` + v + `"`
	case style&yaml.SingleQuotedStyle != 0:
		return `'` + v + `'`
	}
	return v
}

// ErrMoved is wrapped by errors saying the remote branch moved since it
// was read: someone else pushed.
var ErrMoved = errors.New("the remote branch moved")

// Signature is the author of a commit.
type Signature struct{ Name, Email string }

// WorkloadDocument returns the YAML of workload id's object alone, from a
// file that may hold many documents or a List, for applying it.
func WorkloadDocument(content []byte, id platform.ID) ([]byte, error) {
	var out []byte
	err := eachWorkload(content, func(obj *yaml.Node, got platform.ID, _ int) error {
		if got != id || out != nil {
			return nil
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
