package gitrepo

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestKustomizeFetchesNothing builds kustomizations naming an http URL in
// every field kustomize's loader would GET (or a repository it would
// clone), and checks that each is refused with its file and line and that
// the server is never asked.
func TestKustomizeFetchesNothing(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"))
	}))
	t.Cleanup(srv.Close)
	u := srv.URL + "/x.yaml"
	cm := "resources: [cm.yaml]\n"
	cases := map[string]map[string]string{
		"configMapGenerator files": {"kustomization.yaml": cm + "configMapGenerator:\n  - name: c\n    files:\n      - k=" + u + "\n"},
		"configMapGenerator envs":  {"kustomization.yaml": cm + "configMapGenerator:\n  - name: c\n    envs: [" + u + "]\n"},
		"secretGenerator files":    {"kustomization.yaml": cm + "secretGenerator:\n  - name: s\n    files: [" + u + "]\n"},
		"transformers":             {"kustomization.yaml": cm + "transformers:\n  - " + u + "\n"},
		"generators":               {"kustomization.yaml": cm + "generators:\n  - " + u + "\n"},
		"patches path":             {"kustomization.yaml": cm + "patches:\n  - path: " + u + "\n"},
		"patchesStrategicMerge":    {"kustomization.yaml": cm + "patchesStrategicMerge:\n  - " + u + "\n"},
		"openapi":                  {"kustomization.yaml": cm + "openapi:\n  path: " + u + "\n"},
		"crds":                     {"kustomization.yaml": cm + "crds: [" + u + "]\n"},
		"replacements":             {"kustomization.yaml": cm + "replacements:\n  - path: " + u + "\n"},
		"transformer config file": {
			"kustomization.yaml": cm + "transformers: [t.yaml]\n",
			"t.yaml":             "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: " + u + "\n",
		},
		"inline transformer": {"kustomization.yaml": cm + "transformers:\n  - |\n    apiVersion: builtin\n    kind: PatchTransformer\n    metadata: {name: p}\n    path: " + u + "\n"},
		"base's generator":   {"kustomization.yaml": "resources: [base]\n", "base/kustomization.yaml": "configMapGenerator:\n  - name: c\n    envs: [" + u + "]\n"},
		"repository spec":    {"kustomization.yaml": "resources:\n  - git@example.com:org/repo.git//deploy\n"},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			files["cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"
			root := writeTree(t, files)
			k, err := newKustomizer(root)
			if err != nil {
				t.Fatal(err)
			}
			_, err = k.build("")
			if err == nil || !strings.Contains(err.Error(), "kustomization.yaml:") && !strings.Contains(err.Error(), "t.yaml:") {
				t.Errorf("build = %v, want a refusal naming the file and line", err)
			}
			if err != nil && !strings.Contains(err.Error(), "over the network") {
				t.Errorf("build = %v, want it to say what would have been fetched", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was asked %d times, want 0", n)
	}
}

// TestKustomizeLocalPathsStillBuild keeps the check from refusing what
// only names files in the repository.
func TestKustomizeLocalPathsStillBuild(t *testing.T) {
	t.Parallel()
	root := writeTree(t, tree(t, "local-paths"))
	k, err := newKustomizer(root)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := k.build("")
	if err != nil || len(objs) != 2 {
		t.Fatalf("build = %d objects, %v; want 2, nil", len(objs), err)
	}
}
