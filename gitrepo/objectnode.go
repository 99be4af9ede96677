package gitrepo

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Decoding a manifest as Kubernetes does (toObject's slow path) writes
// the YAML node out again, parses it with a second YAML library, turns
// it into JSON and decodes the JSON: three parses of every object. At
// 10,000 workloads that was two thirds of a sync's CPU when nothing had
// changed (BenchmarkScale's profile), and most of the garbage the
// start-up sync leaves. Nearly every manifest holds only mappings with
// string keys, sequences, strings, decimal integers, booleans and nulls;
// for those the node is turned into the same map directly. Anything else
// (floats, timestamps, binary, custom tags, merge keys, non-string or
// repeated keys, strings that are not UTF-8) takes the slow path, so
// what a manifest decodes to does not change
// (TestFastObjectDecodesAsKubernetes, FuzzFastObject).

// fastObject is n, a mapping without aliases, decoded as toObject's slow
// path decodes it; ok is false when n holds anything it does not decode
// the same way for sure.
func fastObject(n *yaml.Node) (m map[string]any, ok bool) {
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	v, ok := fastValue(n, 0, false)
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// maxFastDepth bounds fastValue's recursion; deeper documents take the
// slow path, which has its own limits.
const maxFastDepth = 64

// decimal is an integer as JSON writes it: what decodes to an int64 in
// both paths alike (18 digits at most: no overflow).
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)

// flow says n is inside a flow collection ({...} or [...]), where the
// slow path writes an empty null out as ”.
func fastValue(n *yaml.Node, depth int, flow bool) (any, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.MappingNode:
		if n.ShortTag() != "!!map" || len(n.Content)%2 != 0 {
			return nil, false
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" || !sureString(k) {
				return nil, false
			}
			if _, dup := m[k.Value]; dup {
				return nil, false
			}
			v, ok := fastValue(n.Content[i+1], depth+1, flow)
			if !ok {
				return nil, false
			}
			m[k.Value] = v
		}
		return m, true
	case yaml.SequenceNode:
		if n.ShortTag() != "!!seq" {
			return nil, false
		}
		s := make([]any, 0, len(n.Content))
		for _, x := range n.Content {
			v, ok := fastValue(x, depth+1, flow)
			if !ok {
				return nil, false
			}
			s = append(s, v)
		}
		return s, true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			if !sureString(n) {
				return nil, false
			}
			return n.Value, true
		case "!!null":
			switch {
			case n.Value == "" && flow:
				return nil, false
			case n.Value == "", nullWords[n.Value]:
				return nil, true
			}
			// A tagged null of another word (!!null foo) is refused by
			// the slow path: leave it the slow path's error.
			return nil, false
		case "!!bool":
			switch n.Value {
			case "true", "True", "TRUE":
				return true, true
			case "false", "False", "FALSE":
				return false, true
			}
			return nil, false
		case "!!int":
			if !decimal.MatchString(n.Value) {
				return nil, false
			}
			i, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return nil, false
			}
			return i, true
		}
	}
	return nil, false
}

// sureString says a string scalar stays a string in the slow path. Its
// second YAML library reads YAML 1.1, where a plain (unquoted) yes, on,
// n or 0x1F is no string: the slow path writes plain strings out plain,
// and reads them so (a key n becomes "false"). A quoted or tagged string
// stays one; a plain one surely does when it holds a character no
// number, timestamp or YAML 1.1 word holds (a slash, say), and is none of
// those words. Block scalars (| and >) are left to the slow path.
func sureString(n *yaml.Node) bool {
	if !utf8.ValidString(n.Value) {
		return false
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		// Written out again, a folded block can lose a line break.
		return false
	}
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.TaggedStyle) != 0 {
		return true
	}
	if n.Value == "" || yaml11Words[n.Value] {
		return false
	}
	return strings.IndexFunc(n.Value, func(r rune) bool { return !strings.ContainsRune(numeric, r) }) >= 0
}

// numeric holds every character of a number, a float or a timestamp in
// YAML 1.1 (as the slow path reads them): digits, signs, points, bases,
// exponents, separators.
const numeric = "0123456789abcdefABCDEFxXoObB_+-.:eEtTzZ "

// nullWords are the words both paths read as a null.
var nullWords = map[string]bool{"~": true, "null": true, "Null": true, "NULL": true}

// yaml11Words are the plain words YAML 1.1 reads as booleans, nulls,
// infinities and a merge, which hold letters outside numeric.
var yaml11Words = map[string]bool{}

func init() {
	for _, w := range strings.Fields("y Y yes Yes YES n N no No NO on On ON off Off OFF true True TRUE false False FALSE null Null NULL ~ " +
		".inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF .nan .NaN .NAN <<") {
		yaml11Words[w] = true
	}
}
