package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// fastCases are documents fastObject decodes (fast true) or leaves to the
// slow path; either way ParseObjects' answer is the slow path's.
var fastCases = []struct {
	doc  string
	fast bool
}{
	{"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations: {fluxd.io/automated: \"true\", kx: 'yes', ky: \"on\"}\nspec:\n  replicas: 0\n  template:\n    spec:\n      containers:\n      - {name: app, image: \"reg/app:1.0.3\", ports: [{containerPort: 8080}]}\n", true},
	{"ka: -12\nkb: 0\nkc: 123456789012345678\nkd: ~\nke: null\nkf:\nkg: True\nkh: FALSE\nkk: !!str 12\nkl: 'it''s'\nkm: \"tab\\there\"\nkn: []\nko: {}\n", true},
	{"ka: [1, [2, [3, {kb: [true, null, \"x\"]}]]]\n", true},            // nesting
	{"ka: !!int 12\n", true},                                            // a tagged integer
	{"ka: \"12\"\nkb: '0x1F'\nkc: \"2001-12-14\"\nkd: \"1.5\"\n", true}, // quoted: strings
	{"ka: 'yes'\nkb: \"n\"\n'y': 1\n", true},                            // quoted: strings
	{"image: 127.0.0.1:5000/scale/app-1:1.0.99\nkx: a/b\n", true},       // surely strings
	{"ka: yes\nkb: no\nkc: on\nkd: off\nke: y\nkf: n\n", false},         // YAML 1.1 booleans in the slow path
	{"n: x/y\n", false},                                   // a key YAML 1.1 reads as false
	{"version: 1.0.3\n", false},                           // only number characters: left to the slow path
	{"ka: abc\n", false},                                  // likewise
	{"ka: 12:30:00\n", false},                             // sexagesimal in YAML 1.1
	{"ka: 1.5\n", false},                                  // floats
	{"ka: 1.0\n", false},                                  // decodes to int64 1 in the slow path
	{"ka: 1e3\n", false},                                  // a float
	{"ka: 0777\n", false},                                 // octal
	{"ka: 0x1F\n", false},                                 // hex
	{"ka: 1_000\n", false},                                // underscores
	{"ka: +1\n", false},                                   // a sign
	{"ka: 1234567890123456789\n", false},                  // 19 digits
	{"ka: 2001-12-14\n", false},                           // a timestamp
	{"ka: .inf\n", false},                                 // no JSON for it
	{"ka: !!binary aGVsbG8=\n", false},                    // binary
	{"ka: !custom x\n", false},                            // a custom tag
	{"1: x/y\n", false},                                   // an integer key
	{"ka: 1\nka: 2\n", false},                             // a repeated key
	{"base: &b {kx: 1}\nkd:\n  <<: *b\n  ky: 2\n", false}, // a merge key
	{"ka: \"\\xff\"\n", true},                             // U+00FF
	{"ka: !!bool yes\n", false},                           // a tagged YAML 1.1 boolean
	{"ka: !!null foo\n", false},                           // a tagged null of another word: the slow path refuses it
	{"ka: !!null 0\n", false},                             // likewise
	{"ka: !!null\nkb: !!null ~\nkc: !!null Null\n", true}, // tagged nulls of null's words
	{"? [ka]\n: x/y\n", false},
	{"kx: [0, {ka: }]\n", false},
	{"ka: |\n  two\n  lines\n", false}, // block scalars
	{"ka: >\n 0\n  00\n", false},       // written out again, it loses a line break // an empty null in a flow mapping: '' in the slow path                            // a sequence key
}

// TestFastObjectDecodesAsKubernetes: every document fastObject decodes,
// it decodes as the slow path (Kubernetes' decoding) does, and the ones
// it cannot be sure of are left to the slow path.
func TestFastObjectDecodesAsKubernetes(t *testing.T) {
	for _, c := range fastCases {
		t.Run(c.doc, func(t *testing.T) {
			var d yaml.Node
			if err := yaml.Unmarshal([]byte(c.doc), &d); err != nil {
				t.Fatal(err)
			}
			n := d.Content[0]
			budget := maxAliasExpansion
			n = expandAliases(n, 0, &budget)
			got, ok := fastObject(n)
			if ok != c.fast {
				t.Fatalf("fastObject decoded it: %v, want %v (%v)", ok, c.fast, got)
			}
			want, err := slowObject(n)
			if !ok {
				return
			}
			if err != nil {
				t.Fatalf("the fast path decoded what the slow path refuses (%v): %v", err, got)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("fast path (-slow +fast):\n%s", diff)
			}
		})
	}
}

// FuzzFastObject: whatever fastObject decodes, it decodes as the slow
// path does.
func FuzzFastObject(f *testing.F) {
	for _, c := range fastCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		dec := yaml.NewDecoder(bytes.NewReader(content))
		for {
			var d yaml.Node
			if err := dec.Decode(&d); err != nil {
				if !errors.Is(err, io.EOF) {
					return
				}
				return
			}
			if len(d.Content) == 0 {
				continue
			}
			budget := maxAliasExpansion
			n := expandAliases(d.Content[0], 0, &budget)
			if budget < 0 {
				return
			}
			got, ok := fastObject(n)
			if !ok {
				continue
			}
			want, err := slowObject(n)
			if err != nil {
				t.Fatalf("the fast path decoded what the slow path refuses (%v): %#v", err, got)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("fast path (-slow +fast):\n%s", diff)
			}
		}
	})
}

// BenchmarkParseObjects reads one file of make bench-scale's: a Namespace
// and 100 automated Deployments (10,000 workloads are 100 such files).
func BenchmarkParseObjects(b *testing.B) {
	content := []byte(scaleFile(0))
	b.ReportAllocs()
	for b.Loop() {
		objs, problems := ParseObjects("f.yaml", content)
		if len(objs) != 101 || len(problems) != 0 {
			b.Fatalf("%d objects, problems %v", len(objs), problems)
		}
	}
}

// BenchmarkReadObjects reads make bench-scale's git path at 10,000
// workloads, as a sync does: 100 files of a Namespace and 100
// Deployments.
func BenchmarkReadObjects(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "scale-10000")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for ns := range 100 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("scale-10000-ns-%03d.yaml", ns)), []byte(scaleFile(ns)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		objs, err := ReadObjects(root, []string{dir})
		if err != nil || len(objs.Objects) != 10100 || len(objs.Problems) != 0 {
			b.Fatalf("%v: %d objects, problems %v", err, len(objs.Objects), objs.Problems)
		}
	}
}

// scaleFile is make bench-scale's file of namespace ns.
func scaleFile(ns int) string {
	var m strings.Builder
	fmt.Fprintf(&m, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: scale-10000-ns-%03d\n", ns)
	for i := range 100 {
		fmt.Fprintf(&m, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: scale-10000-ns-%03[2]d
  annotations:
    fluxd.io/automated: "true"
    fluxd.io/tag-all: "semver:^1"
spec:
  replicas: 0
  selector:
    matchLabels: {app: app-%[1]d}
  template:
    metadata:
      labels: {app: app-%[1]d}
    spec:
      containers:
        - name: app
          image: 127.0.0.1:5000/scale-10000/app-%[1]d:1.0.99
`, ns*100+i, ns)
	}
	return m.String()
}
