package gitrepo

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A base's objects are named, in each build, with the namePrefix and
// nameSuffix of every kustomization from that build down to the base,
// outermost first, as kustomize names them; through two bases, both.
// Components (whose own namePrefix applies to the resources of the
// kustomization naming them) leave the names unknown.
func TestKustomizeAffixesFollowTheChain(t *testing.T) {
	root := t.TempDir()
	for f, content := range map[string]string{
		"base/kustomization.yaml":  "resources: [app.yaml]\n",
		"base/app.yaml":            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\n",
		"mid/kustomization.yaml":   "namePrefix: mid-\nnameSuffix: -v1\nresources: [../base]\n",
		"other/kustomization.yaml": "namePrefix: other-\nresources: [../base]\n",
		"prod/kustomization.yaml":  "namePrefix: prod-\nnameSuffix: -p\nresources: [../mid, ../other, own.yaml]\n",
		"prod/own.yaml":            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app-sidecar}\n",
		"comp/kustomization.yaml":  "resources: [../base]\ncomponents: [../c]\n",
		"c/kustomization.yaml":     "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nnamePrefix: c-\n",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := newKustomizer(root)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := k.affixes("prod")
	if !ok {
		t.Fatal("prod's names are known, but affixes says they are not")
	}
	if want := []string{"prod-mid-app-v1-p", "prod-other-app-p"}; !reflect.DeepEqual(names("app", got["base/app.yaml"]), want) {
		t.Errorf("base/app.yaml's Deployment app is built by prod as %v, want %v", names("app", got["base/app.yaml"]), want)
	}
	if want := []string{"prod-app-sidecar-p"}; !reflect.DeepEqual(names("app-sidecar", got["prod/own.yaml"]), want) {
		t.Errorf("prod/own.yaml's app-sidecar is built as %v, want %v", names("app-sidecar", got["prod/own.yaml"]), want)
	}
	if _, ok := k.affixes("comp"); ok {
		t.Error("a build with components: affixes says it knows the names")
	}
	// A Setter whose names are known matches them exactly, and nothing
	// whose name merely contains its object's; unknown, by "contains".
	s := Setter{ObjectName: "app", builtNames: map[string][]string{"prod/kustomization.yaml": names("app", got["base/app.yaml"])}}
	for _, c := range []struct {
		build, name string
		want        bool
	}{
		{"prod/kustomization.yaml", "prod-mid-app-v1-p", true},
		{"prod/kustomization.yaml", "prod-app-sidecar-p", false},
		{"prod/kustomization.yaml", "app", false},
		{"comp/kustomization.yaml", "c-app", true},
		{"comp/kustomization.yaml", "other", false},
	} {
		if got := s.MovedByName(c.build, c.name); got != c.want {
			t.Errorf("MovedByName(%s, %s) = %v, want %v", c.build, c.name, got, c.want)
		}
	}
}
