package gitrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/fluxd/fluxd/platform"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// tree reads the txtar archive testdata/kustomize/NAME.txtar as files by
// name, for writeTree.
func tree(t *testing.T, name string) map[string]string {
	t.Helper()
	a, err := txtar.ParseFile(filepath.Join("testdata", "kustomize", name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	return txtarFiles(a)
}

func TestFindWorkloadsBuildsKustomizations(t *testing.T) {
	t.Parallel()
	root := writeTree(t, tree(t, "overlay"))
	dirs, _ := ResolvePaths(root, []string{"prod"})
	m, err := FindWorkloads(root, dirs)
	if err != nil || len(m.Problems) > 0 {
		t.Fatalf("%v %v", err, m.Problems)
	}
	def := m.Workloads[platform.ID{Namespace: "prod", Kind: "deployment", Name: "web"}]
	if def == nil || !def.Built || def.File != "prod/kustomization.yaml" || def.Containers[0].Image != "reg/web:2.0.0" {
		t.Fatalf("the overlay's workload = %+v (all: %v)", def, m.Workloads)
	}
}

func TestSetKustomizeImages(t *testing.T) {
	t.Parallel()
	id := platform.ID{Namespace: "prod", Kind: "deployment", Name: "web"}
	current := map[string]string{"app": "reg/web:2.0.0", "side": "reg/side:1.0"}
	for _, tc := range []struct {
		name, kust string
		images     map[string]string
		want       string
	}{{
		name:   "a newTag is changed in place, comments kept",
		kust:   "namespace: prod\nresources: [../base]\nimages:\n  # the web tier\n  - name: reg/web\n    newTag: \"2.0.0\" # pinned by fluxd\n",
		images: map[string]string{"app": "reg/web:2.1.0"},
		want:   "namespace: prod\nresources: [../base]\nimages:\n  # the web tier\n  - name: reg/web\n    newTag: \"2.1.0\" # pinned by fluxd\n",
	}, {
		name:   "an image without an entry gets one",
		kust:   "namespace: prod\n# bases\nresources: [../base]\nimages:\n  - name: reg/web\n    newTag: 2.0.0\n",
		images: map[string]string{"side": "reg/side:1.1"},
		want:   "namespace: prod\n# bases\nresources: [../base]\nimages:\n  - name: reg/web\n    newTag: 2.0.0\n  - name: reg/side\n    newTag: \"1.1\"\n",
	}, {
		name:   "a digest gives way to the tag",
		kust:   "namespace: prod\nresources: [../base]\nimages:\n  - name: reg/web\n    newTag: 2.0.0\n    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\n",
		images: map[string]string{"app": "reg/web:2.2.0"},
		want:   "namespace: prod\nresources: [../base]\nimages:\n  - name: reg/web\n    newTag: 2.2.0\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cur := current
			if strings.Contains(tc.kust, "digest") {
				cur = map[string]string{"app": "reg/web@sha256:0000000000000000000000000000000000000000000000000000000000000000", "side": "reg/side:1.0"}
			}
			files := tree(t, "overlay")
			files["prod/kustomization.yaml"] = tc.kust
			root := writeTree(t, files)
			out, err := SetKustomizeImages(root, "prod/kustomization.yaml", []byte(tc.kust), id, cur, tc.images)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A kustomization at the repository's root (--git-path .) builds: its
// directory was "/." in kustomize's in-memory copy, which it refused.
func TestFindWorkloadsBuildsARootKustomization(t *testing.T) {
	t.Parallel()
	root := writeTree(t, tree(t, "root"))
	dirs, _ := ResolvePaths(root, []string{"."})
	m, err := FindWorkloads(root, dirs)
	if err != nil || len(m.Problems) > 0 {
		t.Fatalf("%v %v", err, m.Problems)
	}
	def := m.Workloads[platform.ID{Namespace: "prod", Kind: "deployment", Name: "web"}]
	if def == nil || !def.Built || def.File != "kustomization.yaml" {
		t.Fatalf("the root kustomization's workload = %+v (all: %v)", def, m.Workloads)
	}
}
