package gitrepo

import (
	"bytes"
	"strings"
	"testing"
)

// Content without a marker is used as the raw text of a marked value in
// one of these files.
var setterTemplates = []func(string) string{
	func(v string) string {
		return "kind: ConfigMap\nmetadata: {name: c}\ndata:\n  TAG: " + v + " # {\"$imagepolicy\": \"ns:p:tag\"}\n  b: c # other\n"
	},
	func(v string) string {
		return "images:\n- name: reg/app\n  newTag: " + v + " # {\"$imagepolicy\": \"ns:p:tag\"}\n- name: x\n"
	},
	func(v string) string {
		return "a: {image: " + v + " # {\"$imagepolicy\": \"ns:p\"}\n  , b: c}\n"
	},
	func(v string) string {
		return "kind: A\r\n---\r\nlist:\r\n  - " + v + " # {\"$imagepolicy\": \"ns:p\"}\r\n  - z\r\n"
	},
}

// FuzzSetSetters: whatever the file and the new value, a successful edit
// of a marked field leaves a file that parses, where that field (and
// only it, as Kubernetes reads the file) has the new value, where every
// byte from the marker comment on is as it was, and which fluxd can edit
// again.
func FuzzSetSetters(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "1.2.3")
	}
	for _, s := range valueSeeds {
		f.Add(s, "1.10")
		f.Add(s, "a,b: #c\n'\"\\\u2028")
	}
	f.Add("tag: 1.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n", "true")
	f.Add("tag: &a 1.0 # {\"$imagepolicy\": \"ns:p:tag\"}\nother: *a\n", "2")
	f.Add("tag: !!float 1.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n", "2")
	f.Fuzz(func(t *testing.T, content, value string) {
		if !strings.Contains(content, "$imagepolicy") {
			content = setterTemplates[len(content)%len(setterTemplates)](content)
		}
		in := []byte(content)
		a := &ImageAutomation{}
		a.readFile("f.yaml", in)
		if len(a.Setters) == 0 {
			return
		}
		s := a.Setters[0]
		out, err := SetSetters(policyID, "f.yaml", in, []SetterChange{{Field: s.Field, From: s.Value, To: value}})
		if err != nil {
			return
		}
		b := &ImageAutomation{}
		b.readFile("f.yaml", out)
		if len(b.Setters) != len(a.Setters) {
			t.Fatalf("the edit found %d markers, the file had %d\nbefore:\n%s\nafter:\n%s", len(b.Setters), len(a.Setters), in, out)
		}
		for i, got := range b.Setters {
			want := a.Setters[i]
			if i == 0 {
				want.Value = value
			}
			if got.Field != want.Field || got.Value != want.Value || got.Policy != want.Policy || got.Form != want.Form {
				t.Fatalf("marker %d after the edit is %+v, want %+v\nbefore:\n%s\nafter:\n%s", i, got, want, in, out)
			}
		}
		// The bytes changed end before the marker's comment.
		suffix := 0
		for suffix < len(in) && suffix < len(out) && in[len(in)-1-suffix] == out[len(out)-1-suffix] {
			suffix++
		}
		lines := bytes.Split(in, []byte("\n"))
		marker := lines[s.Line-1]
		at := bytes.LastIndex(marker, []byte("$imagepolicy"))
		if at >= 0 {
			at = bytes.LastIndexByte(marker[:at], '#')
		}
		if at < 0 {
			return // a block scalar's header: the comment is on an earlier line
		}
		offset := 0
		for _, l := range lines[:s.Line-1] {
			offset += len(l) + 1
		}
		if offset+at < len(in)-suffix {
			t.Fatalf("the edit changed bytes at or after the marker comment\nbefore:\n%q\nafter:\n%q", in, out)
		}
		// What fluxd wrote, it can edit again.
		again, err := SetSetters(policyID, "f.yaml", out, []SetterChange{{Field: s.Field, From: value, To: "9.9.9"}})
		if err != nil {
			t.Fatalf("editing its own edit: %v\n%s", err, out)
		}
		c := &ImageAutomation{}
		c.readFile("f.yaml", again)
		if len(c.Setters) == 0 || c.Setters[0].Value != "9.9.9" {
			t.Fatalf("the second edit did not take\n%s", again)
		}
	})
}

// FuzzSetSettersInPatch: a marked field of a kustomization's inline
// patch, whatever its raw value and the new one: a successful edit
// leaves a kustomization whose patch reads as the patch with that field
// changed and nothing else, every line outside the patch's value line as
// it was, and which fluxd can edit again.
func FuzzSetSettersInPatch(f *testing.F) {
	f.Add("reg/app:1.0", "reg/app:1.1")
	f.Add("'1.0'", "1.10")
	f.Add("\"a\\tb\"", "a,b: #c\n'\"")
	f.Add("x\n      y: z", "1")
	f.Fuzz(func(t *testing.T, raw, value string) {
		in := []byte("resources: [d.yaml]\npatches:\n  - patch: |-\n      kind: Deployment\n      metadata: {name: d}\n      v: " + raw + " # {\"$imagepolicy\": \"ns:p\"}\n      w: keep # note\n")
		a := &ImageAutomation{}
		a.readFile("kustomization.yaml", in)
		if len(a.Setters) != 1 {
			return
		}
		s := a.Setters[0]
		out, err := SetSetters(policyID, "kustomization.yaml", in, []SetterChange{{Field: s.Field, From: s.Value, To: value}})
		if err != nil {
			return
		}
		b := &ImageAutomation{}
		b.readFile("kustomization.yaml", out)
		if len(b.Setters) != 1 || b.Setters[0].Field != s.Field || b.Setters[0].Value != value {
			t.Fatalf("after the edit the markers are %+v, want %s = %q\nbefore:\n%s\nafter:\n%s", b.Setters, s.Field, value, in, out)
		}
		inLines, outLines := strings.Split(string(in), "\n"), strings.Split(string(out), "\n")
		if len(inLines) != len(outLines) {
			t.Fatalf("the edit changed the number of lines\nbefore:\n%s\nafter:\n%s", in, out)
		}
		for i := range inLines {
			if i+1 != s.Line && inLines[i] != outLines[i] {
				t.Fatalf("line %d changed, not only the marked line %d\nbefore:\n%s\nafter:\n%s", i+1, s.Line, in, out)
			}
		}
		if !strings.HasSuffix(outLines[s.Line-1], ` # {"$imagepolicy": "ns:p"}`) {
			t.Fatalf("the marker comment moved: %q", outLines[s.Line-1])
		}
		again, err := SetSetters(policyID, "kustomization.yaml", out, []SetterChange{{Field: s.Field, From: value, To: "9.9.9"}})
		if err != nil {
			t.Fatalf("editing its own edit: %v\n%s", err, out)
		}
		c := &ImageAutomation{}
		c.readFile("kustomization.yaml", again)
		if len(c.Setters) != 1 || c.Setters[0].Value != "9.9.9" {
			t.Fatalf("the second edit did not take\n%s", again)
		}
	})
}
