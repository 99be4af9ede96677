// Package yamledit is the byte-span editing every format's edit shares
// (gitrepo's SetImages, SetHelmImages, SetKustomizeImages, SetSetters
// and SetAnnotations; see package gitrepo/format): yaml.v3 nodes say
// where a value starts (line and column) but not where it ends, and
// re-encoding a whole document would lose the file's formatting, so the
// end of a value is found here by scanning the bytes from its start, as
// yaml.v3's own scanner does (span.go); Apply then replaces only those
// bytes, so comments, key order, quoting and indentation elsewhere stay
// byte for byte; EncodeImage and EncodeKey write the new value in the
// style the old one had where it can be (scalar.go). Whatever these get
// wrong is caught afterwards: gitrepo reads every edit back and compares
// it with the intended change (verify.go) before returning it.
package yamledit

import (
	"bytes"
	"fmt"
	"sort"
)

// Edit replaces the bytes of Span with Text.
type Edit struct {
	Span
	Text string
}

// Apply returns content with the edits made; they must not overlap.
// An insertion (an empty span) goes before a replacement starting at the
// same offset.
func Apply(content []byte, edits []Edit) ([]byte, error) {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].Start != edits[j].Start {
			return edits[i].Start < edits[j].Start
		}
		return edits[i].End-edits[i].Start < edits[j].End-edits[j].Start
	})
	var out bytes.Buffer
	prev := 0
	for _, e := range edits {
		if e.Start < prev {
			return nil, fmt.Errorf("two edits overlap at byte %d", e.Start)
		}
		out.Write(content[prev:e.Start])
		out.WriteString(e.Text)
		prev = e.End
	}
	out.Write(content[prev:])
	return out.Bytes(), nil
}
