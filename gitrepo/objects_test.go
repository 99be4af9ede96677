package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseObjectsKeepsLinesAndSkipsOnlyTheBadDocument(t *testing.T) {
	t.Parallel()
	content := `# a comment
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
data: {n: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {}
---
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: s, namespace: x}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: d}
    spec: {replicas: 2}
`
	objs, problems := ParseObjects("dir/f.yaml", []byte(content))
	var got []string
	for _, o := range objs {
		got = append(got, o.Where()+" "+o.Ref().String())
	}
	want := []string{"dir/f.yaml:2 ConfigMap/a", "dir/f.yaml:16 Secret/x/s", "dir/f.yaml:19 Deployment/d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "dir/f.yaml:8: is not a Kubernetes object: it has no metadata.name") {
		t.Errorf("problems = %v, want one naming dir/f.yaml:8", problems)
	}
	if r, _ := objs[2].Manifest["spec"].(map[string]any)["replicas"].(int64); r != 2 {
		t.Errorf("replicas decoded as %T %v, want int64 2", objs[2].Manifest["spec"].(map[string]any)["replicas"], objs[2].Manifest["spec"])
	}
}

func TestParseObjectsMalformedYAML(t *testing.T) {
	t.Parallel()
	_, problems := ParseObjects("f.yaml", []byte("apiVersion: v1\nkind: [\n"))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "f.yaml:") || !strings.Contains(problems[0].Error(), "malformed YAML") {
		t.Errorf("problems = %v", problems)
	}
}

// TestReadObjectsBuildsKustomizations reads a tree with a plain file and
// a kustomize overlay: the overlay's base is built through it, not read
// file by file, and a base outside the repository is refused.
func TestReadObjectsBuildsKustomizations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("deploy/plain.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n")
	write("deploy/app/base/kustomization.yaml", "resources: [web.yaml]\n")
	write("deploy/app/base/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{name: app, image: reg/web:1.0.0}]\n")
	write("deploy/app/prod/kustomization.yaml", "namespace: prod\nnamePrefix: prod-\nresources: [../base]\nimages:\n  - name: reg/web\n    newTag: 2.0.0\n")
	write("deploy/evil/kustomization.yaml", "resources: [../../../../../../etc]\n")
	write("deploy/remote/kustomization.yaml", "resources:\n  - github.com/example/app//deploy?ref=v1\n")
	dirs, err := ResolvePaths(root, []string{"deploy"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ReadObjects(root, dirs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs.Objects {
		got = append(got, o.Where()+" "+o.Ref().String())
	}
	want := []string{"deploy/app/base/kustomization.yaml Deployment/web", "deploy/app/prod/kustomization.yaml Deployment/prod/prod-web", "deploy/plain.yaml:1 ConfigMap/plain"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	prod := objs.Objects[1].Manifest
	img := prod["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
	if img != "reg/web:2.0.0" {
		t.Errorf("the overlay's image is %v, want reg/web:2.0.0", img)
	}
	if len(objs.Problems) != 2 || !strings.Contains(objs.Problems[0].Error(), "deploy/evil/kustomization.yaml") ||
		!strings.Contains(objs.Problems[1].Error(), "deploy/remote/kustomization.yaml:2: resources names \"github.com/example/app//deploy?ref=v1\", which kustomize would fetch over the network") {
		t.Errorf("problems = %v, want the kustomizations reaching out of the repository and to a remote base", objs.Problems)
	}
}

// FuzzParseObjects checks that no file makes ParseObjects panic, and that
// every object it returns can be applied by name: it has an apiVersion, a
// kind and a name, and a line inside the file.
func FuzzParseObjects(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"kind: List\napiVersion: v1\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
		"apiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {name: d}\n",
		"---\n---\nnull\n", "- a\n- b\n", "a: &x [*x]\n", "apiVersion: v1\nkind: [\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		objs, _ := ParseObjects("f.yaml", content)
		lines := strings.Count(string(content), "\n") + 1
		for _, o := range objs {
			r := o.Ref()
			if r.APIVersion == "" || r.Kind == "" || r.Name == "" || o.Line < 1 || o.Line > lines {
				t.Fatalf("object %+v at line %d of %d lacks what an apply needs", r, o.Line, lines)
			}
		}
	})
}

// A list whose items alias anchors that each alias the one before twice
// expands exponentially: a few hundred bytes in git must not hold the
// sync and every release for seconds or exhaust memory. It is refused as a
// problem naming the file, and the other objects are still read.
func TestAliasBombIsRefused(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: bomb}\n  data:\n    l0: &l0 [x, x, x, x, x, x, x, x]\n")
	levels := 30
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "    l%d: &l%d [*l%d, *l%d]\n", i, i, i-1, i-1)
	}
	b.WriteString("- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: ok}\n  data: {a: b}\n")
	objs, problems := ParseObjects("bomb.yaml", []byte(b.String()))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "alias bomb") {
		t.Fatalf("problems = %v; want the bomb refused", problems)
	}
	if len(objs) != 1 || objs[0].Ref().Name != "ok" {
		t.Errorf("objects = %v; want the other ConfigMap read", objs)
	}
}
