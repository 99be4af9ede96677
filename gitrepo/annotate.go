package gitrepo

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/gitrepo/format/yamledit"
	"github.com/fluxd/fluxd/platform"
)

// SetAnnotations returns content with workload id's metadata.annotations
// set to values; an empty value removes the annotation (fluxd reads a
// missing annotation as empty). Values are written double-quoted, as
// Kubernetes wants strings, keys unquoted where YAML allows it.
//
// Only the annotations change: in block style an existing value is
// replaced where it stands (whatever its quoting, over as many lines as it
// took), a removed one loses its lines, and new ones are inserted as lines
// above the first annotation with its indentation (or as a new
// annotations: block above metadata's first key). Flow-style annotations
// ({...}) are rewritten as one flow mapping that keeps the other entries'
// text; flow-style metadata gets an annotations: {...} entry. Everything
// else stays byte for byte, and the result is read back and refused unless
// exactly those annotations changed.
func SetAnnotations(content []byte, id platform.ID, values map[string]string) ([]byte, error) {
	w, err := findWorkload(content, id)
	if err != nil {
		return nil, err
	}
	edits, err := annotationEdits(content, w.obj, values)
	if err != nil {
		return nil, fmt.Errorf("%s: editing annotations: %w", id, err)
	}
	out, err := yamledit.Apply(content, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	err = verifyEdit(content, out, w, func(want, got map[string]any) error {
		return setAnnotations(want, got, values)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: editing annotations: %w", id, err)
	}
	return out, nil
}

// annotationEdits are the edits that make obj's annotations values.
func annotationEdits(content []byte, obj *yaml.Node, values map[string]string) ([]yamledit.Edit, error) {
	metaKey, meta := entry(obj, "metadata")
	if meta == nil || meta.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("metadata is not a mapping")
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	annKey, ann := entry(meta, "annotations")
	flowMeta := meta.Style&yaml.FlowStyle != 0
	switch {
	case ann == nil || ann.Kind == yaml.ScalarNode && ann.Tag == "!!null":
		added, err := newEntries(keys, values, true)
		if err != nil || len(added) == 0 {
			return nil, err
		}
		flow := "{" + strings.Join(added, ", ") + "}"
		if ann != nil {
			vt, err := yamledit.ValueSpan(content, annKey, ann, yamledit.Context{Flow: flowMeta, Indent: annKey.Column - 1})
			if err != nil {
				return nil, fmt.Errorf("finding the empty annotations: %w", err)
			}
			return []yamledit.Edit{{Span: vt.Span, Text: vt.Replace(flow)}}, nil
		}
		if flowMeta {
			open, err := yamledit.NodeStart(content, meta)
			if err != nil || content[open] != '{' {
				return nil, fmt.Errorf("line %d: found no { where metadata starts", meta.Line)
			}
			text := "annotations: " + flow
			if len(meta.Content) > 0 {
				text += ", "
			}
			return []yamledit.Edit{{Span: yamledit.Span{Start: open + 1, End: open + 1}, Text: text}}, nil
		}
		return newAnnotationsBlock(content, metaKey, meta, keys, values)
	case ann.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("line %d: metadata.annotations is not a mapping", ann.Line)
	case ann.Style&yaml.FlowStyle != 0:
		return flowAnnotations(content, ann, keys, values)
	}
	return blockAnnotations(content, annKey, ann, keys, values)
}

// newEntries are key: "value" for the keys that are set to a value and,
// if all, also for those that already are.
func newEntries(keys []string, values map[string]string, flow bool) ([]string, error) {
	var out []string
	for _, k := range keys {
		if values[k] == "" {
			continue
		}
		ek, err := yamledit.EncodeKey(k, flow)
		if err != nil {
			return nil, err
		}
		ev, err := yamledit.DoubleQuoted(values[k])
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		out = append(out, ek+": "+ev)
	}
	return out, nil
}

// unchanged says whether the annotation value v already is the string s.
func unchanged(v *yaml.Node, s string) bool {
	return v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == s
}

// blockAnnotations edits a block-style annotations mapping in place.
func blockAnnotations(content []byte, annKey, ann *yaml.Node, keys []string, values map[string]string) ([]yamledit.Edit, error) {
	nl := lineBreak(content)
	var edits []yamledit.Edit
	var add []string
	removed := 0
	for _, k := range keys {
		v := values[k]
		key, val := entry(ann, k)
		if key == nil {
			if v != "" {
				add = append(add, k)
			}
			continue
		}
		if v != "" && unchanged(val, v) {
			continue
		}
		if val.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: annotation %s is not a string", val.Line, k)
		}
		vt, err := yamledit.ValueSpan(content, key, val, yamledit.Context{Indent: key.Column - 1})
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		if v == "" {
			ls, err := ownLine(content, key)
			if err != nil {
				return nil, fmt.Errorf("removing annotation %s: %w", k, err)
			}
			edits = append(edits, yamledit.Edit{Span: yamledit.Span{Start: ls, End: yamledit.AfterLine(content, vt.End)}, Text: ""})
			removed++
			continue
		}
		ev, err := yamledit.DoubleQuoted(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		edits = append(edits, yamledit.Edit{Span: vt.Span, Text: vt.Replace(ev)})
	}
	if removed == len(ann.Content)/2 && len(add) == 0 {
		// Nothing is left: remove the annotations key too, rather than
		// leave it null.
		ls, err := ownLine(content, annKey)
		if err != nil {
			return nil, fmt.Errorf("removing the annotations: %w", err)
		}
		lastKey, last := ann.Content[len(ann.Content)-2], ann.Content[len(ann.Content)-1]
		if last.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: annotation %s is not a string", last.Line, lastKey.Value)
		}
		vt, err := yamledit.ValueSpan(content, lastKey, last, yamledit.Context{Indent: lastKey.Column - 1})
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", lastKey.Value, err)
		}
		return []yamledit.Edit{{Span: yamledit.Span{Start: ls, End: yamledit.AfterLine(content, vt.End)}, Text: ""}}, nil
	}
	if len(add) == 0 {
		return edits, nil
	}
	lines, err := newEntries(add, values, false)
	if err != nil {
		return nil, err
	}
	first := ann.Content[0]
	ls, err := ownLine(content, first)
	if err != nil {
		return nil, fmt.Errorf("adding annotations: %w", err)
	}
	indent := strings.Repeat(" ", first.Column-1)
	return append(edits, yamledit.Edit{Span: yamledit.Span{Start: ls, End: ls}, Text: indent + strings.Join(lines, nl+indent) + nl}), nil
}

// newAnnotationsBlock inserts an annotations: block above the first key of
// block-style metadata, indented as the file indents nested mappings.
func newAnnotationsBlock(content []byte, metaKey, meta *yaml.Node, keys []string, values map[string]string) ([]yamledit.Edit, error) {
	lines, err := newEntries(keys, values, false)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	if len(meta.Content) == 0 {
		return nil, fmt.Errorf("line %d: metadata is empty", meta.Line)
	}
	first := meta.Content[0]
	ls, err := ownLine(content, first)
	if err != nil {
		return nil, fmt.Errorf("adding annotations: %w", err)
	}
	step := "  "
	if d := first.Column - metaKey.Column; d > 0 {
		step = strings.Repeat(" ", d)
	}
	// Indent as the file's other nested mappings under metadata do.
	for i := 1; i < len(meta.Content); i += 2 {
		v := meta.Content[i]
		if v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 {
			if d := v.Content[0].Column - first.Column; d > 0 {
				step = strings.Repeat(" ", d)
			}
			break
		}
	}
	nl := lineBreak(content)
	indent := strings.Repeat(" ", first.Column-1)
	text := indent + "annotations:" + nl
	for _, line := range lines {
		text += indent + step + line + nl
	}
	return []yamledit.Edit{{Span: yamledit.Span{Start: ls, End: ls}, Text: text}}, nil
}

// flowAnnotations rewrites a flow-style annotations mapping as one flow
// mapping: entries left alone keep their text, changed ones keep their
// key's text, new ones go last.
func flowAnnotations(content []byte, ann *yaml.Node, keys []string, values map[string]string) ([]yamledit.Edit, error) {
	open, err := yamledit.NodeStart(content, ann)
	if err != nil || content[open] != '{' {
		return nil, fmt.Errorf("line %d: found no { where the annotations start", ann.Line)
	}
	ctx := yamledit.Context{Flow: true}
	var parts []string
	changed := false
	last := open + 1
	has := map[string]bool{}
	for i := 0; i+1 < len(ann.Content); i += 2 {
		key, val := ann.Content[i], ann.Content[i+1]
		has[key.Value] = true
		if val.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: annotation %s is not a string", val.Line, key.Value)
		}
		if key.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: an annotation's key is not a string", key.Line)
		}
		kp, err := yamledit.NodeProperties(content, key)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", key.Value, err)
		}
		vs, err := yamledit.ValueSpan(content, key, val, ctx)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", key.Value, err)
		}
		if bytes.IndexByte(content[last:kp.Start], '#') >= 0 {
			return nil, fmt.Errorf("line %d: the flow-style annotations hold comments, which a rewrite would lose; write them in block style", ann.Line)
		}
		last = vs.End
		v, set := values[key.Value]
		switch {
		case !set || v != "" && unchanged(val, v):
			text := string(content[kp.Start:vs.End])
			if vs.Start == vs.End {
				text += " " // an empty value: keep "key:" from running into the comma
			}
			parts = append(parts, text)
		case v == "":
			changed = true
		default:
			ev, err := yamledit.DoubleQuoted(v)
			if err != nil {
				return nil, fmt.Errorf("annotation %s: %w", key.Value, err)
			}
			parts = append(parts, string(content[kp.Start:vs.Start])+vs.Replace(ev))
			changed = true
		}
	}
	end, commented, err := yamledit.FlowEnd(content, last, '}')
	if err != nil {
		return nil, fmt.Errorf("line %d: finding the end of the annotations: %w", ann.Line, err)
	}
	if commented {
		return nil, fmt.Errorf("line %d: the flow-style annotations hold comments, which a rewrite would lose; write them in block style", ann.Line)
	}
	var add []string
	for _, k := range keys {
		if !has[k] {
			add = append(add, k)
		}
	}
	added, err := newEntries(add, values, true)
	if err != nil {
		return nil, err
	}
	if !changed && len(added) == 0 {
		return nil, nil
	}
	parts = append(parts, added...)
	return []yamledit.Edit{{Span: yamledit.Span{Start: open, End: end}, Text: "{" + strings.Join(parts, ", ") + "}"}}, nil
}

// ownLine is the start of the line n is on, which must hold nothing before
// n but indentation.
func ownLine(content []byte, n *yaml.Node) (int, error) {
	off, err := yamledit.OffsetOf(content, n.Line, n.Column)
	if err != nil {
		return 0, err
	}
	ls := yamledit.LineStart(content, off)
	if strings.Trim(string(content[ls:off]), " ") != "" {
		return 0, fmt.Errorf("line %d: %q does not start its line", n.Line, n.Value)
	}
	return ls, nil
}

// lineBreak is the line break the file uses.
func lineBreak(content []byte) string {
	if bytes.Contains(content, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// setAnnotations is SetAnnotations on decoded objects, for verifyEdit. An
// empty or null annotations mapping counts as none.
func setAnnotations(want, got map[string]any, values map[string]string) error {
	for i, obj := range []map[string]any{want, got} {
		meta := mapAt(obj, "metadata")
		if meta == nil {
			return fmt.Errorf("metadata is not a mapping of strings")
		}
		ann, ok := meta["annotations"].(map[string]any)
		if !ok && meta["annotations"] != nil {
			return fmt.Errorf("metadata.annotations is not a mapping of strings")
		}
		if i == 0 {
			if ann == nil {
				ann = map[string]any{}
			}
			for k, v := range values {
				if v == "" {
					delete(ann, k)
				} else {
					ann[k] = v
				}
			}
		}
		if len(ann) == 0 {
			delete(meta, "annotations")
		} else {
			meta["annotations"] = ann
		}
	}
	return nil
}
