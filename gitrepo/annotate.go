package gitrepo

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/platform"
)

// SetAnnotations returns content with workload id's metadata.annotations
// set to values (quoted, as Kubernetes wants strings). Existing keys have
// their value replaced in place; new keys are inserted as new lines in
// block style with the indentation the file already uses. Nothing else in
// the file changes. Metadata written in flow style ({...}) is refused.
func SetAnnotations(content []byte, id platform.ID, values map[string]string) ([]byte, error) {
	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	found := false
	err := eachWorkload(content, func(obj *yaml.Node, got platform.ID, _ int) error {
		if got != id || found {
			return nil
		}
		found = true
		meta := lookup(obj, "metadata")
		if meta == nil || meta.Kind != yaml.MappingNode || meta.Style&yaml.FlowStyle != 0 || len(meta.Content) == 0 {
			return fmt.Errorf("%s: metadata is written in flow style ({...}) or is empty; write it in block style so fluxd can add annotations", id)
		}
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		ann := lookup(meta, "annotations")
		if ann != nil && (ann.Kind != yaml.MappingNode || ann.Style&yaml.FlowStyle != 0 || len(ann.Content) == 0) {
			return fmt.Errorf("%s: metadata.annotations is written in flow style or is empty; write it in block style so fluxd can edit it", id)
		}
		var inserts []string
		for _, k := range keys {
			v := strconv.Quote(values[k]) // YAML double quotes take Go's escapes
			if ann != nil {
				if val := lookup(ann, k); val != nil && val.Kind == yaml.ScalarNode {
					start, end, err := scalarSpan(content, val)
					if err != nil {
						return fmt.Errorf("%s: annotation %s: %w", id, k, err)
					}
					edits = append(edits, edit{start, end, v})
					continue
				}
			}
			inserts = append(inserts, k+": "+v)
		}
		if len(inserts) == 0 {
			return nil
		}
		if ann != nil {
			first := ann.Content[0]
			at := lineOffset(content, first.Line)
			indent := strings.Repeat(" ", first.Column-1)
			edits = append(edits, edit{at, at, indent + strings.Join(inserts, "\n"+indent) + "\n"})
			return nil
		}
		first := meta.Content[0]
		at := lineOffset(content, first.Line)
		indent := strings.Repeat(" ", first.Column-1)
		step := "  "
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
		text := indent + "annotations:\n"
		for _, line := range inserts {
			text += indent + step + line + "\n"
		}
		edits = append(edits, edit{at, at, text})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", id, platform.ErrNotFound)
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := bytes.Clone(content)
	for _, e := range edits {
		out = append(out[:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out, nil
}

// lineOffset is the byte offset where 1-based line starts.
func lineOffset(content []byte, line int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(content[off:], '\n')
		if i < 0 {
			return len(content)
		}
		off += i + 1
	}
	return off
}
