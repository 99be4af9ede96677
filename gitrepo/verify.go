package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"

	"go.yaml.in/yaml/v3"
)

// verifyEdit reads the file before and after an edit of workload w as
// Kubernetes would (aliases and merge keys resolved, styles and comments
// gone) and checks that the only difference is the intended one: change
// is applied to w's object as read before (want) and may normalise w's
// object as read after (got); then every document must be equal. An edit
// that fails here is refused, so a mistake in finding or writing bytes
// never reaches a commit.
func verifyEdit(before, after []byte, w workload, change func(want, got map[string]any) error) error {
	want, err := decodeDocs(before)
	if err != nil {
		return fmt.Errorf("reading the file before the edit: %w", err)
	}
	got, err := decodeDocs(after)
	if err != nil {
		return fmt.Errorf("the edited file would not parse (%w); nothing was changed", err)
	}
	if len(want) != len(got) {
		return fmt.Errorf("the edited file would hold %d documents instead of %d; nothing was changed", len(got), len(want))
	}
	wantObj, err := objectAt(want, w)
	if err != nil {
		return err
	}
	gotObj, err := objectAt(got, w)
	if err != nil {
		return fmt.Errorf("the edited file would lose the workload: %w", err)
	}
	if err := change(wantObj, gotObj); err != nil {
		return err
	}
	for i := range want {
		if path, ok := firstDiff(want[i], got[i], ""); !ok {
			if path == "" {
				path = "its top level"
			}
			return fmt.Errorf("the edited file would differ from the intended one in document %d at %s; nothing was changed (please report this with the file)", i+1, path)
		}
	}
	return nil
}

// decodeDocs decodes every document of content, as yaml.v3's decoder
// reads them in eachWorkload.
func decodeDocs(content []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var docs []any
	for {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var v any
		if len(d.Content) > 0 {
			if err := d.Decode(&v); err != nil {
				return nil, err
			}
		}
		docs = append(docs, v)
	}
}

// objectAt is w's object in decoded documents.
func objectAt(docs []any, w workload) (map[string]any, error) {
	if w.doc >= len(docs) {
		return nil, fmt.Errorf("document %d is missing", w.doc+1)
	}
	v := docs[w.doc]
	if w.item >= 0 {
		root, _ := v.(map[string]any)
		items, _ := root["items"].([]any)
		if w.item >= len(items) {
			return nil, fmt.Errorf("item %d of document %d is missing", w.item+1, w.doc+1)
		}
		v = items[w.item]
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("document %d does not hold the workload as a mapping of strings", w.doc+1)
	}
	return obj, nil
}

// mapAt follows keys through nested string-keyed mappings; nil if one is
// missing or not such a mapping.
func mapAt(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// get is m[key] for either kind of decoded mapping (map[any]any when a
// key is not a string); nil if m is neither.
func get(m any, key string) any {
	switch m := m.(type) {
	case map[string]any:
		return m[key]
	case map[any]any:
		return m[key]
	}
	return nil
}

// firstDiff compares two decoded values; when they differ, it says where.
func firstDiff(a, b any, path string) (string, bool) {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return path, false
		}
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			bv, ok := b[k]
			if !ok {
				return path + "." + k, false
			}
			if p, ok := firstDiff(a[k], bv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case map[any]any:
		b, ok := b.(map[any]any)
		if !ok || len(a) != len(b) {
			return path, false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok {
				return fmt.Sprintf("%s.%v", path, k), false
			}
			if p, ok := firstDiff(av, bv, fmt.Sprintf("%s.%v", path, k)); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return path, false
		}
		for i := range a {
			if p, ok := firstDiff(a[i], b[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	case float64:
		if b, ok := b.(float64); ok && math.IsNaN(a) && math.IsNaN(b) {
			return "", true
		}
	}
	if !reflect.DeepEqual(a, b) {
		return path, false
	}
	return "", true
}
