package gitrepo

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

var app = platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}

// deployment is a Deployment named app whose pod spec's containers are
// containers, indented to sit under "      containers:".
func deployment(containers string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app # keep\nspec:\n  template:\n    spec:\n      containers:\n" + containers + "      # after\n"
}

func TestSetImagesEveryStyle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want, image string
	}{
		{"plain", "      - name: app\n        image: reg/app:1 # pinned\n", "      - name: app\n        image: reg/app:2 # pinned\n", ""},
		{"single-quoted", "      - name: app\n        image: 'reg/app:1'\n", "      - name: app\n        image: 'reg/app:2'\n", ""},
		{"single-quoted with ''", "      - name: app\n        image: 'reg/it''s:1'\n", "      - name: app\n        image: 'reg/app:2'\n", ""},
		{"double-quoted", "      - name: app\n        image: \"reg/app:1\"\n", "      - name: app\n        image: \"reg/app:2\"\n", ""},
		{"double-quoted with escapes", "      - name: app\n        image: \"reg/\\x61pp:1\\\"\\\\\"\n", "      - name: app\n        image: \"reg/app:2\"\n", ""},
		{"double-quoted over two lines", "      - name: app\n        image: \"reg/app:\\\n          1\"\n        ports: []\n", "      - name: app\n        image: \"reg/app:2\"\n        ports: []\n", ""},
		{"single-quoted over two lines", "      - name: app\n        image: 'reg/app:\n          1'\n", "      - name: app\n        image: 'reg/app:2'\n", ""},
		{"plain over two lines", "      - name: app\n        image: reg/app:1\n          -debug\n        ports: []\n", "      - name: app\n        image: reg/app:2\n        ports: []\n", ""},
		{"literal", "      - name: app\n        image: |-\n          reg/app:1\n\n        ports: []\n", "      - name: app\n        image: \"reg/app:2\"\n\n        ports: []\n", ""},
		{"folded with indicator and comment", "      - name: app\n        image: >2- # folded\n          reg/app:1\n      - name: b\n        image: b\n", "      - name: app\n        image: \"reg/app:2\" # folded\n      - name: b\n        image: b\n", ""},
		{"empty literal", "      - name: app\n        image: |\n      - name: b\n        image: b\n", "      - name: app\n        image: \"reg/app:2\"\n      - name: b\n        image: b\n", ""},
		{"null", "      - name: app\n        image:\n        ports: []\n", "      - name: app\n        image: reg/app:2\n        ports: []\n", ""},
		{"tagged", "      - name: app\n        image: !!str reg/app:1\n", "      - name: app\n        image: !!str reg/app:2\n", ""},
		{"anchored", "      - name: app\n        image: &img reg/app:1\n", "      - name: app\n        image: &img reg/app:2\n", ""},
		{"empty with an anchor", "      - name: app\n        image: &img # none yet\n", "      - name: app\n        image: &img reg/app:2 # none yet\n", ""},
		{"tagged other than a string", "      - name: app\n        image: &img !!int 1\n", "      - name: app\n        image: &img reg/app:2\n", ""},
		{"null in flow", "      - {name: app, image: , x: y}\n", "      - {name: app, image: reg/app:2 , x: y}\n", ""},
		{"flow container list", "      - {name: app, image: reg/app:1}\n", "      - {name: app, image: reg/app:2}\n", ""},
		{"flow list of flow containers", "        [{name: app, image: 'reg/app:1'}, {name: b, image: b}]\n", "        [{name: app, image: 'reg/app:2'}, {name: b, image: b}]\n", ""},
		{"flow container, new value needs quotes", "      - {name: app, image: reg/app:1}\n", "      - {name: app, image: \"reg/app,2\"}\n", "reg/app,2"},
		{"plain, new value needs quotes", "      - name: app\n        image: reg/app:1\n", "      - name: app\n        image: \"reg/app #2\"\n", "reg/app #2"},
		{"single-quoted, new value has a newline", "      - name: app\n        image: 'reg/app:1'\n", "      - name: app\n        image: \"reg/app\\n2\"\n", "reg/app\n2"},
		{"unicode", "      - name: app\n        image: \"reg/äpp:1\"\n", "      - name: app\n        image: \"reg/äpp:2\\u2028\"\n", "reg/äpp:2\u2028"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			image := tc.image
			if image == "" {
				image = "reg/app:2"
			}
			got, err := SetImages([]byte(deployment(tc.in)), app, planned([]byte(deployment(tc.in)), app, map[string]string{"app": image}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(deployment(tc.want), string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			defs, err := ParseFile("f.yaml", got)
			if err != nil {
				t.Fatal(err)
			}
			if got := defs[0].Containers[0].Image; got != image {
				t.Errorf("image read back = %q, want %q", got, image)
			}
		})
	}
}

func TestSetImagesCRLF(t *testing.T) {
	t.Parallel()
	in := strings.ReplaceAll(deployment("      - name: app\n        image: |-\n          reg/app:1\n      - name: b\n        image: 'b'\n"), "\n", "\r\n")
	got, err := SetImages([]byte(in), app, planned([]byte(in), app, map[string]string{"app": "reg/app:2", "b": "c"}))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(deployment("      - name: app\n        image: \"reg/app:2\"\n      - name: b\n        image: 'c'\n"), "\n", "\r\n")
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// An edit that would change anything but the intended values is refused.
func TestSetImagesRefusesSideEffects(t *testing.T) {
	t.Parallel()
	// The image's anchor is used by another container, which would change
	// with it.
	in := deployment("      - name: app\n        image: &img reg/app:1\n      - name: b\n        image: *img\n")
	_, err := SetImages([]byte(in), app, planned([]byte(in), app, map[string]string{"app": "reg/app:2"}))
	if err == nil || !strings.Contains(err.Error(), "containers[1].image") {
		t.Errorf("aliased image: %v", err)
	}
}

func TestSetImagesMultiDocument(t *testing.T) {
	t.Parallel()
	other := "# first\napiVersion: v1\nkind: Service\nmetadata: {name: app}\nspec:\n    ports: [{port: 80}]   # odd spacing\n"
	third := "kind: Deployment\nmetadata:\n  name: app\n  namespace: other\nspec: {template: {spec: {containers: [{name: app, image: \"reg/app:1\"}]}}}\n"
	in := other + "---\n" + deployment("      - name: app\n        image: reg/app:1\n") + "---\n" + third + "...\n"
	got, err := SetImages([]byte(in), app, planned([]byte(in), app, map[string]string{"app": "reg/app:2"}))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(got), "---\n")
	if len(docs) != 3 {
		t.Fatalf("got %d documents:\n%s", len(docs), got)
	}
	for i, want := range []string{other, deployment("      - name: app\n        image: reg/app:2\n"), third + "...\n"} {
		if diff := cmp.Diff(want, docs[i]); diff != "" {
			t.Errorf("document %d (-want +got):\n%s", i+1, diff)
		}
	}
}

const typedLists = `apiVersion: apps/v1
kind: DeploymentList
items:
- metadata: {name: web, namespace: x}
  spec:
    template:
      spec:
        containers:
        - name: web
          image: reg/web:1
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: api, namespace: x}
  spec: {template: {spec: {containers: [{name: api, image: reg/api:1}]}}}
---
apiVersion: apps/v1
kind: StatefulSetList
items:
- metadata: {name: db, namespace: x}
  spec: {template: {spec: {containers: [{name: db, image: reg/db:1}]}}}
---
apiVersion: batch/v1
kind: CronJobList
items:
- metadata: {name: backup, namespace: x}
  spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: b, image: reg/b:1}]}}}}}
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: agent, namespace: x}
  spec: {template: {spec: {containers: [{name: a, image: reg/a:1}]}}}
- metadata: {name: no-kind, namespace: x}
`

func TestTypedLists(t *testing.T) {
	t.Parallel()
	defs, err := ParseFile("lists.yaml", []byte(typedLists))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range defs {
		got = append(got, d.ID.String()+" "+d.Containers[0].Image)
	}
	want := []string{"x:deployment/web reg/web:1", "x:deployment/api reg/api:1", "x:statefulset/db reg/db:1", "x:cronjob/backup reg/b:1", "x:daemonset/agent reg/a:1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseFile (-want +got):\n%s", diff)
	}

	web := platform.ID{Namespace: "x", Kind: "deployment", Name: "web"}
	out, err := SetImages([]byte(typedLists), web, planned([]byte(typedLists), web, map[string]string{"web": "reg/web:2"}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Replace(typedLists, "reg/web:1", "reg/web:2", 1), string(out)); diff != "" {
		t.Errorf("SetImages (-want +got):\n%s", diff)
	}
	out, err = SetAnnotations(out, web, map[string]string{"fluxd.io/automated": "true"})
	if err != nil {
		t.Fatal(err)
	}
	wantOut := strings.Replace(strings.Replace(typedLists, "reg/web:1", "reg/web:2", 1), "{name: web,", `{annotations: {fluxd.io/automated: "true"}, name: web,`, 1)
	if diff := cmp.Diff(wantOut, string(out)); diff != "" {
		t.Errorf("SetAnnotations (-want +got):\n%s", diff)
	}

	doc, err := WorkloadDocument([]byte(typedLists), web)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc), "apiVersion: apps/v1\nkind: Deployment\nmetadata:") {
		t.Errorf("WorkloadDocument of a typed list's item lacks its kind:\n%s", doc)
	}
	_, err = WorkloadDocument([]byte(typedLists), platform.ID{Namespace: "x", Kind: "deployment", Name: "none"})
	if !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("WorkloadDocument of a missing workload: %v", err)
	}
}

// planned is images (container → new image) as changes from the images
// the workload has in content, as a plan would name them.
func planned(content []byte, id platform.ID, images map[string]string) map[string]ImageChange {
	out := map[string]ImageChange{}
	defs, _ := ParseFile("f.yaml", content)
	for name, img := range images {
		ch := ImageChange{To: img}
		for _, d := range defs {
			for _, c := range d.Containers {
				if d.ID == id && c.Name == name {
					ch.From = c.Image
				}
			}
		}
		out[name] = ch
	}
	return out
}
