package gitrepo

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fluxd/fluxd/platform"
)

// Seeds for both fuzzers: the styles the table tests cover, in one place.
var fuzzSeeds = []string{
	deployment("      - name: app\n        image: reg/app:1 # pinned\n"),
	deployment("      - name: app\n        image: \"reg/\\x61pp:\\\n          1\"\n      - {name: b, image: 'it''s'}\n"),
	deployment("      - name: app\n        image: >2- # folded\n          reg/app:1\n\n      - name: b\n        image: plain\n          two\n"),
	"kind: Deployment\nmetadata: {name: web, namespace: x, annotations: {a: b, c: 'd'}}\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}\n",
	"kind: Deployment\r\nmetadata:\r\n  name: app\r\n  annotations:\r\n    a: |\r\n      x\r\n    b: \"c\\\"\"\r\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}\r\n",
	typedLists,
	multiDoc,
	helmRelease("  values:\n    image: reg/app:1 # pinned\n    backend:\n      image: {repository: 'reg/api', tag: \"1\"}\n"),
	helmRelease("  values:\n    image:\n      registry: reg.io\n      repository: >-\n        team/app\n      tag: |-\n        v1\n"),
	"apiVersion: helm.fluxcd.io/v1\nkind: HelmRelease\nmetadata:\n  name: hr\n  annotations:\n    repository.fluxcd.io/app: a.b\n    tag.fluxcd.io/app: a.t\nspec: {values: {a: {b: reg/app, t: '1'}}}\n",
}

// Most mutations of a whole file leave no workload to edit, so content
// that holds none is used instead as the raw text of the value to edit, in
// one of these files.
var (
	imageTemplates = []func(string) string{
		func(v string) string {
			return deployment("      - name: app\n        image: " + v + "\n        ports: []\n")
		},
		func(v string) string { return deployment("      - {name: app, image: " + v + "}\n") },
		func(v string) string {
			return helmRelease("  values:\n    web:\n      image:\n        repository: " + v + "\n        tag: \"1\"\n")
		},
	}
	annotationTemplates = []func(string) string{
		func(v string) string {
			return "kind: Deployment\nmetadata:\n  name: app\n  annotations: " + v + "\n  labels: {a: b}\nspec: {}\n"
		},
		func(v string) string { return "kind: Deployment\nmetadata: {name: app, annotations: " + v + "}\n" },
		func(v string) string {
			return "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    a: " + v + "\n    b: c # comment\n"
		},
	}
	valueSeeds = []string{
		"reg/app:1 # c", `"reg/\x61pp:\` + "\n" + `   1"`, "'it''s'", "|-\n          reg/a\n\n", ">2\n           x\n           y", "plain\n          more",
		"{a: b, 'c': \"d\"}", "\n    a: 'x'\n    b: |\n      y", "{}", "", "!!str &x v", "{\n  a: b,\n  c: d\n }",
	}
)

// fuzzContent is content if it holds a workload, else content as a value
// in one of templates.
func fuzzContent(content string, templates []func(string) string) []byte {
	if firstWorkload([]byte(content)) != nil {
		return []byte(content)
	}
	return []byte(templates[len(content)%len(templates)](content))
}

// checkEdit is what every successful edit must satisfy, whatever the
// input: the output parses, the workload now has want's images and
// annotations, and every other definition reads as before; and, as read
// by verifyEdit, only the images and annotations set (as SetImages and
// SetAnnotations take them) changed.
func checkEdit(t *testing.T, before, after []byte, want *Definition, images, annotations map[string]string) {
	t.Helper()
	defs, err := ParseFile("f.yaml", before)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFile("f.yaml", after)
	if err != nil {
		t.Fatalf("the edit does not parse: %v\n%s", err, after)
	}
	for i, d := range defs {
		if d.ID == want.ID {
			defs[i] = want
		}
	}
	if diff := cmp.Diff(defs, got, cmpopts.IgnoreFields(Definition{}, "Line", "Digest"), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("definitions after the edit (-want +got):\n%s\nbefore:\n%s\nafter:\n%s", diff, before, after)
	}
	w, err := findWorkload(after, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The edited workload's document as a whole: only the intended
	// values, checked above, may differ.
	if err := verifyEdit(before, after, w, func(w, g map[string]any) error {
		if want.ID.Kind == platform.KindHelmRelease {
			if err := setHelmWant(before, want.ID, w, images); err != nil {
				return err
			}
		} else if err := setImages(w, want.ID.Kind, images); err != nil {
			return err
		}
		if annotations == nil {
			// An image edit: SetImages's own check leaves annotations
			// alone, whatever shape they have (a scalar included).
			return nil
		}
		return setAnnotations(w, g, annotations)
	}); err != nil {
		t.Fatalf("%v\nbefore:\n%s\nafter:\n%s", err, before, after)
	}
}

// firstWorkload is the first definition in content, if its ID is unique
// there.
func firstWorkload(content []byte) *Definition {
	defs, err := ParseFile("f.yaml", content)
	if err != nil || len(defs) == 0 {
		return nil
	}
	for _, d := range defs[1:] {
		if d.ID == defs[0].ID {
			return nil
		}
	}
	return defs[0]
}

func FuzzSetImages(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "reg/app:2")
		f.Add(s, "a,b: #c\n'\"\\\u2028")
		// A pinned image, as a release under fluxd.io/pin-digest writes it.
		f.Add(s, "reg:5000/app:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	}
	for _, s := range valueSeeds {
		f.Add(s, "reg/app:2")
	}
	f.Fuzz(func(t *testing.T, content, image string) {
		content = string(fuzzContent(content, imageTemplates))
		def := firstWorkload([]byte(content))
		if def == nil || len(def.Containers) == 0 {
			return
		}
		name := def.Containers[0].Name
		out, err := SetImages([]byte(content), def.ID, planned([]byte(content), def.ID, map[string]string{name: image}))
		if err != nil {
			return
		}
		want := *def
		want.Containers = append([]Container(nil), def.Containers...)
		for i := range want.Containers {
			if want.Containers[i].Name == name {
				want.Containers[i].Image = image
			}
		}
		checkEdit(t, []byte(content), out, &want, map[string]string{name: image}, nil)
		// What fluxd wrote, it can edit again.
		again, err := SetImages(out, def.ID, planned(out, def.ID, map[string]string{name: "reg/app:3"}))
		if err != nil {
			t.Fatalf("editing its own edit: %v\n%s", err, out)
		}
		for i := range want.Containers {
			if want.Containers[i].Name == name {
				want.Containers[i].Image = "reg/app:3"
			}
		}
		checkEdit(t, out, again, &want, map[string]string{name: "reg/app:3"}, nil)
	})
}
