package yamledit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// EncodeImage writes an image as a scalar, keeping the style the old value
// had where the new one can be written in it, double-quoted otherwise
// (block scalars included: an image is one line).
func EncodeImage(v string, style yaml.Style, flow bool) (string, error) {
	switch {
	case style&(yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
	case style&yaml.SingleQuotedStyle != 0:
		if singleOK(v) {
			return "'" + strings.ReplaceAll(v, "'", "''") + "'", nil
		}
	case plainOK(v, flow):
		return v, nil
	}
	return DoubleQuoted(v)
}

// EncodeKey writes a mapping key: plain when that reads back as the same
// string, double-quoted otherwise. yaml.v3 reads a key only if it ends
// within 1024 characters of its start (Kubernetes' own limit on annotation
// keys is far below that).
func EncodeKey(k string, flow bool) (string, error) {
	if len(k) > 1000 {
		return "", fmt.Errorf("the key %.20q... is %d bytes long, more than YAML allows a key", k, len(k))
	}
	if plainOK(k, flow) {
		return k, nil
	}
	q, err := DoubleQuoted(k)
	if err == nil && len(q) > 1000 {
		return "", fmt.Errorf("the key %.20q... is too long to write in YAML", k)
	}
	return q, err
}

// DoubleQuoted writes v as a YAML double-quoted scalar. For valid UTF-8,
// every escape strconv.Quote writes is a YAML escape with the same
// meaning: \a \b \f \n \r \t \v \\ \", \xXX only below U+0080 (where YAML's
// code point and Go's byte agree), \uXXXX and \UXXXXXXXX; and what it
// leaves unescaped is printable in YAML (U+0085, U+2028 and U+2029, which
// yaml.v3 would read as line breaks, are escaped). Invalid UTF-8 has no
// YAML form.
func DoubleQuoted(v string) (string, error) {
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("%q is not valid UTF-8, which YAML cannot hold", v)
	}
	return strconv.Quote(v), nil
}

// plainOK says whether v can be written unquoted and read back as the same
// string: yaml.v3's emitter decides that for block context, and flow
// context ends a plain scalar at any of ",?[]{}".
func plainOK(v string, flow bool) bool {
	if v == "" || !utf8.ValidString(v) || flow && strings.ContainsAny(v, ",?[]{}") {
		return false
	}
	out, err := yaml.Marshal(v)
	return err == nil && string(out) == v+"\n"
}

// singleOK says whether v can be single-quoted on one line: single quotes
// have no escape but a doubled quote, so every character must be printable.
func singleOK(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}
