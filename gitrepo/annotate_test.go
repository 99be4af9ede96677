package gitrepo

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

func TestSetAnnotations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		values         map[string]string
	}{
		{
			name:   "no annotations yet",
			in:     "kind: Deployment\nmetadata:\n    name: app # the app\n    labels:\n        a: b\nspec: {}\n",
			values: map[string]string{"fluxd.io/automated": "true"},
			want:   "kind: Deployment\nmetadata:\n    annotations:\n        fluxd.io/automated: \"true\"\n    name: app # the app\n    labels:\n        a: b\nspec: {}\n",
		},
		{
			name:   "add to existing",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    x: y # keep\n",
			values: map[string]string{"fluxd.io/locked": "true", "fluxd.io/lock-message": `say "no"`},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/lock-message: \"say \\\"no\\\"\"\n    fluxd.io/locked: \"true\"\n    x: y # keep\n",
		},
		{
			name:   "replace a value in place",
			in:     "---\nkind: Service\n---\nkind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/automated: 'true' # on\n",
			values: map[string]string{"fluxd.io/automated": "false"},
			want:   "---\nkind: Service\n---\nkind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/automated: \"false\" # on\n",
		},
		{
			name:   "flow-style metadata",
			in:     "kind: Deployment\nmetadata: {name: app, namespace: default} # compact\nspec: {}\n",
			values: map[string]string{"fluxd.io/locked": "true", "fluxd.io/lock-message": `the "big" one`},
			want:   "kind: Deployment\nmetadata: {annotations: {fluxd.io/lock-message: \"the \\\"big\\\" one\", fluxd.io/locked: \"true\"}, name: app, namespace: default} # compact\nspec: {}\n",
		},
		{
			name:   "flow-style annotations",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations: {a: b, fluxd.io/locked: 'true', fluxd.io/lock-message: \"x\"}  # keep\n",
			values: map[string]string{"fluxd.io/locked": "false", "fluxd.io/lock-message": "", "fluxd.io/tag-all": `regex:^build-(\d+)$`},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations: {a: b, fluxd.io/locked: \"false\", fluxd.io/tag-all: \"regex:^build-(\\\\d+)$\"}  # keep\n",
		},
		{
			name:   "empty flow-style annotations",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations: {}\n",
			values: map[string]string{"a/b": "c"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations: {a/b: \"c\"}\n",
		},
		{
			name:   "multi-line flow-style annotations",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations: {\n    a: b,\n    c: 'd'\n  }\n",
			values: map[string]string{"c": "e"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations: {a: b, c: \"e\"}\n",
		},
		{
			name:   "null annotations",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n  labels: {a: b}\n",
			values: map[string]string{"a": "b"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations: {a: \"b\"}\n  labels: {a: b}\n",
		},
		{
			name:   "replace every quoting style and multi-line values",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: 'it''s'\n    b: \"say \\\"no\\\"\\\\\"\n    c: |\n      two\n      lines\n    d: >- # folded\n      one\n      line\n    e: plain\n      over lines\n    f: \"quoted\n      over lines\"\n    g: keep\n",
			values: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: \"1\"\n    b: \"2\"\n    c: \"3\"\n    d: \"4\" # folded\n    e: \"5\"\n    f: \"6\"\n    g: keep\n",
		},
		{
			name:   "remove some",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    # lock\n    fluxd.io/locked: \"true\"\n    fluxd.io/lock-message: |\n      two\n      lines\n    x: y\n",
			values: map[string]string{"fluxd.io/locked": "", "fluxd.io/lock-message": "", "absent": ""},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    # lock\n    x: y\n",
		},
		{
			name:   "remove all",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations: # policies\n    fluxd.io/locked: \"true\"\n    fluxd.io/lock-message: \"x\"\n  labels: {}\n",
			values: map[string]string{"fluxd.io/locked": "", "fluxd.io/lock-message": ""},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  labels: {}\n",
		},
		{
			name:   "remove the first and add",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: b\n",
			values: map[string]string{"a": "", "c": "d"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    c: \"d\"\n",
		},
		{
			name:   "unchanged values keep their text",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: 'b'\n",
			values: map[string]string{"a": "b"},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: 'b'\n",
		},
		{
			name:   "keys that need quotes",
			in:     "kind: Deployment\nmetadata:\n  name: app\n",
			values: map[string]string{"a: b": "x", "true": "y"},
			want:   "kind: Deployment\nmetadata:\n  annotations:\n    \"a: b\": \"x\"\n    \"true\": \"y\"\n  name: app\n",
		},
		{
			name:   "CRLF",
			in:     "kind: Deployment\r\nmetadata:\r\n  name: app\r\n  annotations:\r\n    a: |\r\n      x\r\n    b: c\r\n",
			values: map[string]string{"a": "y", "b": "", "d": "e"},
			want:   "kind: Deployment\r\nmetadata:\r\n  name: app\r\n  annotations:\r\n    d: \"e\"\r\n    a: \"y\"\r\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := SetAnnotations([]byte(tc.in), app, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			defs, err := ParseFile("f.yaml", got)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.values {
				if got, ok := defs[len(defs)-1].Annotations[k]; got != v || ok != (v != "") {
					t.Errorf("annotation %s = %q after the edit, want %q", k, defs[len(defs)-1].Annotations[k], v)
				}
			}
		})
	}
}

// Values fluxd writes itself, whatever they hold, can be edited again and
// removed, in block and in flow style; removing what was added gives back
// the original (in block style, byte for byte).
func TestAnnotationsRoundTrip(t *testing.T) {
	t.Parallel()
	web := platform.ID{Namespace: "x", Kind: "deployment", Name: "web"}
	files := map[string]string{
		"block":            "kind: Deployment\nmetadata:\n  name: web # the site\n  namespace: x\nspec: {}\n",
		"flow":             "kind: Deployment\nmetadata: {name: web, namespace: x}\nspec: {}\n",
		"flow annotations": "kind: Deployment\nmetadata:\n  name: web\n  namespace: x\n  annotations: {other: \"1\"}\n",
	}
	values := map[string]string{
		"double quotes": `the "big" one`,
		"backslash":     `regex:^build-(\d+)$`,
		"newline":       "line one\nline two\n",
		"unicode":       "ünïcödé ✓ 🚀 \u00a0\u0085\u2028\ufeff",
		"controls":      "\x00\x01\t\x1b\x7f",
		"quotes":        `'"''"\\`,
		"spaces":        "  padded  ",
		"yaml-ish":      "- [a, b]: {c: #d}",
	}
	for fname, in := range files {
		for vname, v := range values {
			t.Run(fname+"/"+vname, func(t *testing.T) {
				t.Parallel()
				read := func(content []byte) map[string]string {
					t.Helper()
					defs, err := ParseFile("f.yaml", content)
					if err != nil {
						t.Fatalf("%v\n%s", err, content)
					}
					return defs[0].Annotations
				}
				const k1, k2 = "fluxd.io/lock-message", "fluxd.io/tag.app"
				out, err := SetAnnotations([]byte(in), web, map[string]string{k1: v, k2: v})
				if err != nil {
					t.Fatal(err)
				}
				if got := read(out); got[k1] != v || got[k2] != v {
					t.Fatalf("written: got %q, %q, want %q\n%s", got[k1], got[k2], v, out)
				}
				out, err = SetAnnotations(out, web, map[string]string{k1: v + "again", k2: "plain"})
				if err != nil {
					t.Fatalf("editing again: %v\n%s", err, out)
				}
				if got := read(out); got[k1] != v+"again" || got[k2] != "plain" {
					t.Fatalf("edited again: got %q, %q\n%s", got[k1], got[k2], out)
				}
				out, err = SetAnnotations(out, web, map[string]string{k1: "", k2: ""})
				if err != nil {
					t.Fatalf("removing: %v\n%s", err, out)
				}
				got := read(out)
				if _, ok := got[k1]; ok {
					t.Errorf("removed, yet there:\n%s", out)
				}
				if fname == "block" {
					if diff := cmp.Diff(in, string(out)); diff != "" {
						t.Errorf("added and removed (-want +got):\n%s", diff)
					}
				}
			})
		}
	}
}
