package yamledit

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// yaml.v3 nodes say where a node starts (line and column) but not where it
// ends, and re-encoding a whole document with yaml.v3 would lose the
// file's formatting. So the end of a node is found here by scanning the
// bytes from its start, following yaml.v3's own scanner (scannerc.go) rule
// for rule for each scalar style. Whatever these functions get wrong is
// caught afterwards: every edit is read back and compared (verify.go).

// Span is a byte range [start, end) of content.
type Span struct{ Start, End int }

// Context is what the scanner needs to know about where a node sits.
type Context struct {
	// flow is true inside a flow collection ({...} or [...]).
	Flow bool
	// indent is yaml.v3's indentation level (0-based column) of the block
	// mapping the node is a value of.
	Indent int
}

// OffsetOf turns a node's 1-based line and column (counted in characters,
// with the line breaks yaml.v3 knows: \r\n, \r, \n, NEL, LS, PS) into a
// byte offset of content.
func OffsetOf(content []byte, line, column int) (int, error) {
	off, l, c := 0, 1, 1
	if bytes.HasPrefix(content, []byte("\xef\xbb\xbf")) {
		off = 3 // yaml.v3 does not count a byte-order mark
	}
	for off < len(content) && (l < line || l == line && c < column) {
		if w := breakAt(content, off); w > 0 {
			if l == line {
				break // the column is past the end of the line
			}
			off += w
			l, c = l+1, 1
			continue
		}
		_, w := utf8.DecodeRune(content[off:])
		off += w
		c++
	}
	if l != line || c != column {
		return 0, fmt.Errorf("line %d column %d is not in the file", line, column)
	}
	return off, nil
}

// breakAt is the width of the line break at content[i], 0 if none.
func breakAt(b []byte, i int) int {
	if i >= len(b) {
		return 0
	}
	switch {
	case b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n':
		return 2
	case b[i] == '\r' || b[i] == '\n':
		return 1
	case b[i] == 0xC2 && i+1 < len(b) && b[i+1] == 0x85:
		return 2
	case b[i] == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
		return 3
	}
	return 0
}

func blankAt(b []byte, i int) bool { return i < len(b) && (b[i] == ' ' || b[i] == '\t') }

// blankzAt is yaml.v3's is_blankz: a blank, a break or the end.
func blankzAt(b []byte, i int) bool { return i >= len(b) || blankAt(b, i) || breakAt(b, i) > 0 }

// LineStart is the offset of the start of the line holding offset i.
func LineStart(b []byte, i int) int {
	for i > 0 && b[i-1] != '\n' && b[i-1] != '\r' {
		i--
	}
	return i
}

// AfterLine is the offset just past the line break ending the line that
// holds offset i (or the end of content).
func AfterLine(b []byte, i int) int {
	for i < len(b) {
		if w := breakAt(b, i); w > 0 {
			return i + w
		}
		i++
	}
	return i
}

// Properties are a node's anchor and tag, which yaml.v3 counts as the
// start of the node.
type Properties struct {
	// start is where the node starts (its first property, if any), end
	// just past its last property, value where its value starts.
	Start, End, Value int
	Anchor, Tag       string
}

// NodeProperties finds n's properties and where its value starts.
func NodeProperties(content []byte, n *yaml.Node) (Properties, error) {
	off, err := OffsetOf(content, n.Line, n.Column)
	if err != nil {
		return Properties{}, err
	}
	p := Properties{Start: off, End: off}
	for off < len(content) && (content[off] == '&' || content[off] == '!') {
		begin := off
		if content[off] == '&' {
			off++
			for off < len(content) && isAnchorChar(content[off]) {
				off++
			}
			p.Anchor = string(content[begin:off])
		} else {
			for !blankzAt(content, off) {
				off++
			}
			p.Tag = string(content[begin:off])
		}
		p.End = off
		// Spaces, line breaks and comments may sit between the properties
		// and the value.
		for {
			if w := breakAt(content, off); w > 0 {
				off += w
			} else if blankAt(content, off) {
				off++
			} else if off < len(content) && content[off] == '#' && off > 0 && (blankAt(content, off-1) || content[off-1] == '\n' || content[off-1] == '\r') {
				for off < len(content) && breakAt(content, off) == 0 {
					off++
				}
			} else {
				break
			}
		}
	}
	p.Value = off
	return p, nil
}

// isAnchorChar is yaml.v3's is_alpha, the characters of an anchor's name.
func isAnchorChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// NodeStart is where n's own text starts: past its anchor and tag.
func NodeStart(content []byte, n *yaml.Node) (int, error) {
	p, err := NodeProperties(content, n)
	return p.Value, err
}

// ValueText is where a value is written and what an edit must keep.
type ValueText struct {
	Span
	// Pad goes before the new value: a space after a bare colon, or the
	// anchor of a value whose tag the edit drops.
	Pad string
	// Comment is a block scalar's header comment, which the span covers.
	Comment string
}

// Replace is the text that replaces the value with encoded.
func (v ValueText) Replace(encoded string) string {
	if v.Comment != "" {
		return v.Pad + encoded + " " + v.Comment
	}
	return v.Pad + encoded
}

// ScalarSpan finds the bytes of scalar node n. A tag other than a string's
// is inside the span, so that the new value is read as a string.
func ScalarSpan(content []byte, n *yaml.Node, ctx Context) (ValueText, error) {
	if n.Kind != yaml.ScalarNode {
		return ValueText{}, fmt.Errorf("line %d: not a scalar", n.Line)
	}
	p, err := NodeProperties(content, n)
	if err != nil {
		return ValueText{}, err
	}
	// A tag other than a string's is dropped with the old value (its
	// anchor kept), so that the new value reads as a string.
	v := ValueText{Span: Span{Start: p.Value, End: p.Value}}
	switch p.Tag {
	case "", "!", "!!str", "!<tag:yaml.org,2002:str>":
		if n.Value == "" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			// An empty value sits just past its properties.
			if p.End == p.Start {
				return ValueText{}, fmt.Errorf("line %d: an empty value without an anchor or a tag", n.Line)
			}
			return ValueText{Span: Span{Start: p.End, End: p.End}, Pad: " "}, nil
		}
	default:
		v.Start = p.Start
		if p.Anchor != "" {
			v.Pad = p.Anchor + " "
		}
		if n.Value == "" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			v.End = p.End
			return v, nil
		}
	}
	start := p.Value
	if start >= len(content) {
		return ValueText{}, fmt.Errorf("line %d: the value is past the end of the file", n.Line)
	}
	switch c := content[start]; {
	case c == '"' && n.Style&yaml.DoubleQuotedStyle != 0:
		v.End, err = doubleQuotedEnd(content, start)
	case c == '\'' && n.Style&yaml.SingleQuotedStyle != 0:
		v.End, err = singleQuotedEnd(content, start)
	case (c == '|' || c == '>') && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		v.End, v.Comment = blockScalarEnd(content, start, ctx.Indent)
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0:
		v.End = plainEnd(content, start, ctx)
		if v.End == start {
			err = fmt.Errorf("line %d: found no value where yaml said one starts", n.Line)
		}
	default:
		err = fmt.Errorf("line %d: the value does not start with the quoting its style needs", n.Line)
	}
	if err != nil {
		return ValueText{}, err
	}
	return v, nil
}

// doubleQuotedEnd is the offset just past the closing quote of the
// double-quoted scalar at start; a backslash escapes the next character.
func doubleQuotedEnd(b []byte, start int) (int, error) {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("a double-quoted value has no closing quote")
}

// singleQuotedEnd is the offset just past the closing quote of the
// single-quoted scalar at start; ” is an escaped quote.
func singleQuotedEnd(b []byte, start int) (int, error) {
	for i := start + 1; i < len(b); i++ {
		if b[i] == '\'' {
			if i+1 < len(b) && b[i+1] == '\'' {
				i++
				continue
			}
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("a single-quoted value has no closing quote")
}

// blockScalarEnd is the end of the last content line of the literal (|) or
// folded (>) scalar whose header starts at start, as yaml.v3's
// yaml_parser_scan_block_scalar finds it; parent is the indentation of the
// mapping holding it. Trailing empty lines stay outside the span. comment
// is the header line's comment, if any.
func blockScalarEnd(b []byte, start, parent int) (end int, comment string) {
	i := start + 1
	increment := 0
	for k := 0; k < 2 && i < len(b); k++ {
		switch {
		case b[i] == '+' || b[i] == '-':
			i++
		case b[i] >= '1' && b[i] <= '9':
			increment = int(b[i] - '0')
			i++
		}
	}
	end = i
	header := i
	for blankAt(b, i) {
		i++
	}
	if i < len(b) && b[i] == '#' {
		c := i
		for i < len(b) && breakAt(b, i) == 0 {
			i++
		}
		comment = string(b[c:i])
	}
	for i < len(b) && breakAt(b, i) == 0 {
		i++ // not valid YAML; the read-back check will refuse it
	}
	i += breakAt(b, i)
	indent := 0
	if increment > 0 {
		indent = max(parent, 0) + increment
	}
	// breaks eats indentation and empty lines as
	// yaml_parser_scan_block_scalar_breaks does, returning the column
	// reached on the first non-empty line.
	breaks := func() int {
		maxIndent := 0
		for {
			col := 0
			for (indent == 0 || col < indent) && i < len(b) && b[i] == ' ' {
				i++
				col++
			}
			maxIndent = max(maxIndent, col)
			w := breakAt(b, i)
			if w == 0 {
				if indent == 0 {
					indent = max(maxIndent, parent+1, 1)
				}
				return col
			}
			i += w
		}
	}
	col := breaks()
	for col == indent && i < len(b) {
		for i < len(b) && breakAt(b, i) == 0 {
			i++
		}
		end = i
		if i >= len(b) {
			break
		}
		i += breakAt(b, i)
		col = breaks()
	}
	if end == header {
		comment = "" // no content: the span ends before the comment
	}
	return end, comment
}

// plainEnd is the end of the plain scalar at start, as yaml.v3's
// yaml_parser_scan_plain_scalar finds it: it may run over several lines,
// ends at " #", at ": ", in flow context at any of ",?[]{}", at a line
// less indented than the mapping's content in block context, and at a
// document marker.
func plainEnd(b []byte, start int, ctx Context) int {
	i, end := start, start
	col := -1 // column on the current line, once known after a break
	for {
		if col == 0 && i+3 <= len(b) && (string(b[i:i+3]) == "---" || string(b[i:i+3]) == "...") && blankzAt(b, i+3) {
			break
		}
		if i < len(b) && b[i] == '#' {
			break
		}
		for !blankzAt(b, i) {
			if b[i] == ':' && blankzAt(b, i+1) ||
				ctx.Flow && bytes.IndexByte([]byte(",?[]{}"), b[i]) >= 0 {
				break
			}
			_, w := utf8.DecodeRune(b[i:])
			i += w
			end = i
		}
		if !(blankAt(b, i) || breakAt(b, i) > 0) {
			break
		}
		for blankAt(b, i) || breakAt(b, i) > 0 {
			if w := breakAt(b, i); w > 0 {
				i += w
				col = 0
				continue
			}
			i++
			if col >= 0 {
				col++
			}
		}
		if !ctx.Flow && col >= 0 && col < ctx.Indent+1 {
			break
		}
	}
	return end
}

// ValueSpan is where the value of a mapping entry, key: value, is
// written. An empty value without properties (null) has an empty span just
// past the colon, and a pad of " ".
func ValueSpan(content []byte, key, value *yaml.Node, ctx Context) (ValueText, error) {
	if value.Kind == yaml.ScalarNode && value.Value == "" && value.Style == 0 {
		p, err := NodeProperties(content, value)
		if err == nil && p.Start < len(content) && (content[p.Start] == '&' || content[p.Start] == '!') {
			return ScalarSpan(content, value, ctx)
		}
		// yaml.v3 places an empty value at the next token; find the colon
		// after the key instead.
		ks, err := ScalarSpan(content, key, ctx)
		if err != nil {
			return ValueText{}, err
		}
		i := ks.End
		for blankAt(content, i) {
			i++
		}
		if i >= len(content) || content[i] != ':' {
			return ValueText{}, fmt.Errorf("line %d: found no colon after the key %q", key.Line, key.Value)
		}
		return ValueText{Span: Span{Start: i + 1, End: i + 1}, Pad: " "}, nil
	}
	return ScalarSpan(content, value, ctx)
}

// FlowEnd is the offset just past the closing bracket of a flow
// collection, scanning from where its last entry ends (or just past its
// opening bracket if it has none) over commas, spaces and comments. It
// reports whether it passed a comment.
func FlowEnd(b []byte, from int, closer byte) (int, bool, error) {
	commented := false
	for i := from; i < len(b); i++ {
		switch {
		case b[i] == closer:
			return i + 1, commented, nil
		case b[i] == '#':
			commented = true
			for i < len(b) && breakAt(b, i) == 0 {
				i++
			}
		case b[i] == ',' || blankAt(b, i) || breakAt(b, i) > 0:
		default:
			return 0, false, fmt.Errorf("expected %q, found %q", closer, b[i])
		}
	}
	return 0, false, fmt.Errorf("found no closing %q", closer)
}
