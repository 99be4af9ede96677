package gitrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const fluxObjects = `apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: podinfo
  namespace: flux-system
spec:
  image: ghcr.io/stefanprodan/podinfo
  interval: 1m
  exclusionList: ["^.*\\.sig$"]
  secretRef: {name: creds}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: podinfo
  namespace: flux-system
spec:
  imageRepositoryRef:
    name: podinfo
  filterTags:
    pattern: '^main-[a-f0-9]+-(?P<ts>[0-9]+)'
    extract: '$ts'
  policy:
    numerical:
      order: desc
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImagePolicy
metadata:
  name: semver
  namespace: apps
spec:
  imageRepositoryRef: {name: podinfo, namespace: flux-system}
  policy:
    semver:
      range: 5.0.x
  digestReflectionPolicy: Always
---
apiVersion: image.toolkit.fluxcd.io/v1beta1
kind: ImagePolicy
metadata: {name: old, namespace: flux-system}
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageUpdateAutomation
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 30m
  sourceRef:
    kind: GitRepository
    name: flux-system
  git:
    checkout:
      ref:
        branch: main
    commit:
      author:
        email: fluxcdbot@users.noreply.github.com
        name: fluxcdbot
      messageTemplate: '{{range .Updated.Images}}{{println .}}{{end}}'
    push:
      branch: main
  update:
    path: ./clusters/my-cluster
    strategy: Setters
`

func TestFindImageAutomation(t *testing.T) {
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
	write("flux-system/image.yaml", fluxObjects)
	write("apps/cfg.yaml", "kind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  TAG: \"5.0.0\" # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n  BAD: x # {\"$imagepolicy\": \"podinfo\"}\n")
	write("apps/kustomization.yaml", "images:\n- name: podinfo\n  newTag: 5.0.0 # {\"$imagepolicy\": \"apps:semver:tag\"}\n")
	a, err := FindImageAutomation(root, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	wantPolicies := []ImagePolicy{
		{NSName: NSName{"flux-system", "podinfo"}, File: "flux-system/image.yaml", Line: 12, Repository: NSName{"flux-system", "podinfo"}, Numerical: true, Order: "desc", Pattern: "^main-[a-f0-9]+-(?P<ts>[0-9]+)", Extract: "$ts"},
		{NSName: NSName{"apps", "semver"}, File: "flux-system/image.yaml", Line: 27, Repository: NSName{"flux-system", "podinfo"}, SemverRange: "5.0.x", DigestReflection: "Always"},
	}
	if diff := cmp.Diff(wantPolicies, a.Policies); diff != "" {
		t.Errorf("policies (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]ImageRepository{{NSName{"flux-system", "podinfo"}, "ghcr.io/stefanprodan/podinfo", []string{`^.*\.sig$`}}}, a.Repositories); diff != "" {
		t.Errorf("repositories (-want +got)\n%s", diff)
	}
	wantAuto := []ImageUpdateAutomation{{NSName: NSName{"flux-system", "flux-system"}, File: "flux-system/image.yaml", Path: "./clusters/my-cluster", Author: Signature{"fluxcdbot", "fluxcdbot@users.noreply.github.com"}}}
	if diff := cmp.Diff(wantAuto, a.Automations); diff != "" {
		t.Errorf("automations (-want +got)\n%s", diff)
	}
	var fields []string
	for _, s := range a.Setters {
		fields = append(fields, s.Field+" "+s.Policy.String()+" "+string(s.Form)+" "+s.Value)
	}
	wantFields := []string{
		"apps/cfg.yaml:ConfigMap/default/cfg:data.TAG flux-system/podinfo tag 5.0.0",
		"apps/kustomization.yaml:images[0].newTag apps/semver tag 5.0.0",
	}
	if diff := cmp.Diff(wantFields, fields, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("setters (-want +got)\n%s", diff)
	}
	// Unsupported fields and versions are warned about, not silently
	// dropped.
	all := strings.Join(a.Warnings, "\n")
	for _, want := range []string{
		"spec.secretRef",
		"spec.git.checkout, spec.git.commit.messageTemplate, spec.git.push",
		"apiVersion image.toolkit.fluxcd.io/v1beta1 is not one fluxd reads",
		"apps/cfg.yaml:5: the $imagepolicy marker names \"podinfo\"",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning about %s in:\n%s", want, all)
		}
	}
}
