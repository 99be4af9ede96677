package gitrepo

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
	"github.com/google/go-cmp/cmp"
)

const automationObjects = `apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata: {name: app, namespace: flux-system}
spec: {image: reg.example/app}
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImagePolicy
metadata: {name: app, namespace: flux-system}
spec:
  imageRepositoryRef: {name: app}
  policy: {semver: {range: ">=1.0.0"}}
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImagePolicy
metadata: {name: other, namespace: apps}
spec:
  imageRepositoryRef: {name: app, namespace: flux-system}
  policy: {alphabetical: {}}
`

func automationRepo(t *testing.T, files map[string]string) *Manifests {
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
	m, err := FindWorkloads(root, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func automation(ns, path string, extra string) string {
	return "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {name: auto, namespace: " + ns + "}\nspec:\n  update: {path: " + path + ", strategy: Setters}\n  git: {commit: {author: {name: bot, email: bot@example.invalid}}}\n" + extra
}

const markedFiles = "kind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  TAG: \"1.0.0\" # {\"$imagepolicy\": \"flux-system:app:tag\"}\n  IMG: reg.example/app:1.0.0 # {\"$imagepolicy\": \"flux-system:app\"}\n  NAME: reg.example/app # {\"$imagepolicy\": \"flux-system:app:name\"}\n  DIGEST: sha256:0 # {\"$imagepolicy\": \"flux-system:app:digest\"}\n  OTHER: x # {\"$imagepolicy\": \"apps:other:tag\"}\n  GONE: x # {\"$imagepolicy\": \"flux-system:missing\"}\n"

// Each case is named after the Flux v2 rule of ImageUpdateAutomation it
// checks.
func TestImagePolicyServices(t *testing.T) {
	t.Parallel()
	app := platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "app"}
	t.Run("an automation updates the markers under its update.path of policies in its namespace", func(t *testing.T) {
		t.Parallel()
		m := automationRepo(t, map[string]string{"flux/objects.yaml": automationObjects + "---\n" + automation("flux-system", "./apps", "  policySelector: {matchLabels: {team: a}}\n"), "apps/cfg.yaml": markedFiles})
		def := m.Workloads[app]
		if def == nil {
			t.Fatalf("no service %s: %v", app, m.Workloads)
		}
		// (:name names the ImageRepository's image, beside the :tag
		// field that says which tag it goes with.)
		want := []Container{
			{Name: "apps/cfg.yaml:ConfigMap/default/cfg:data.IMG", Image: "reg.example/app:1.0.0"},
			{Name: "apps/cfg.yaml:ConfigMap/default/cfg:data.NAME", Image: "reg.example/app:1.0.0"},
			{Name: "apps/cfg.yaml:ConfigMap/default/cfg:data.TAG", Image: "reg.example/app:1.0.0"},
		}
		got := append([]Container(nil), def.Containers...)
		sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("fields (-want +got)\n%s", diff)
		}
		if def.Annotations[policy.Automated] != "true" {
			t.Errorf("not automated: %v", def.Annotations)
		}
		if def.Author == nil || *def.Author != (Signature{"bot", "bot@example.invalid"}) {
			t.Errorf("author %v, want the automation's git.commit.author", def.Author)
		}
		warn := strings.Join(def.Warnings, "\n")
		for _, w := range []string{"does not reflect digests (spec.digestReflectionPolicy is Never, the default)", "ImageUpdateAutomation flux-system/auto: fluxd does not honour spec.policySelector"} {
			if !strings.Contains(warn, w) {
				t.Errorf("no warning about %q in:\n%s", w, warn)
			}
		}
		// apps:other is in another namespace than the automation: as in
		// Flux v2, its marker is not updated.
		other := m.Workloads[platform.ID{Namespace: "apps", Kind: "imagepolicy", Name: "other"}]
		if other == nil || len(other.Containers) != 0 || other.Annotations[policy.Automated] == "true" {
			t.Errorf("a policy of another namespace than the automation's is automated: %+v", other)
		}
		var problems []string
		for _, p := range m.Problems {
			problems = append(problems, p.Error())
		}
		if !strings.Contains(strings.Join(problems, "\n"), "flux-system/missing, which is not in git") {
			t.Errorf("a marker naming a missing policy is not reported: %v", problems)
		}
	})
	t.Run("markers outside update.path are not updated", func(t *testing.T) {
		t.Parallel()
		m := automationRepo(t, map[string]string{"flux/objects.yaml": automationObjects + "---\n" + automation("flux-system", "./clusters/prod", ""), "apps/cfg.yaml": markedFiles})
		def := m.Workloads[app]
		if len(def.Containers) != 0 || def.Annotations[policy.Automated] == "true" {
			t.Errorf("fields outside update.path are automated: %+v", def)
		}
		if !strings.Contains(strings.Join(def.Warnings, "\n"), "outside the update.path") {
			t.Errorf("no warning: %v", def.Warnings)
		}
	})
	t.Run("a suspended automation automates nothing", func(t *testing.T) {
		t.Parallel()
		m := automationRepo(t, map[string]string{"flux/objects.yaml": automationObjects + "---\n" + automation("flux-system", ".", "  suspend: true\n"), "apps/cfg.yaml": markedFiles})
		def := m.Workloads[app]
		if def.Annotations[policy.Automated] == "true" || len(def.Containers) != 3 {
			t.Errorf("suspended: automated=%q, %d fields (want releasable by hand, not automated)", def.Annotations[policy.Automated], len(def.Containers))
		}
	})
	t.Run("markers in a file a kustomization builds from move what it builds", func(t *testing.T) {
		t.Parallel()
		m := automationRepo(t, map[string]string{"flux/objects.yaml": automationObjects + "---\n" + automation("flux-system", ".", ""),
			"apps/base/cfg.yaml": markedFiles, "apps/kustomization.yaml": "resources: [base/cfg.yaml]\n", "apps/unread.yaml": markedFiles})
		def := m.Workloads[app]
		var builds []string
		for _, s := range def.Setters {
			if s.File != "apps/base/cfg.yaml" {
				t.Errorf("%s is offered, but no build reads its file", s.Field)
			}
			builds = append(builds, strings.Join(s.Builds, ","))
		}
		if diff := cmp.Diff([]string{"apps/kustomization.yaml", "apps/kustomization.yaml", "apps/kustomization.yaml"}, builds); diff != "" {
			t.Errorf("the builds of the base's fields (-want +got)\n%s", diff)
		}
		if !strings.Contains(strings.Join(def.Warnings, "\n"), "no kustomization fluxd builds under --git-path reads its file") {
			t.Errorf("no warning about apps/unread.yaml: %v", def.Warnings)
		}
	})
	t.Run("without an automation nothing is automated", func(t *testing.T) {
		t.Parallel()
		m := automationRepo(t, map[string]string{"flux/objects.yaml": automationObjects, "apps/cfg.yaml": markedFiles})
		if def := m.Workloads[app]; def.Annotations[policy.Automated] == "true" {
			t.Errorf("automated without an ImageUpdateAutomation: %+v", def)
		}
	})
	t.Run("fluxd's lock on the ImagePolicy holds the automation", func(t *testing.T) {
		t.Parallel()
		locked := strings.Replace(automationObjects, "metadata: {name: app, namespace: flux-system}\nspec:\n  imageRepositoryRef", "metadata: {name: app, namespace: flux-system, annotations: {fluxd.io/locked: \"true\"}}\nspec:\n  imageRepositoryRef", 1)
		m := automationRepo(t, map[string]string{"flux/objects.yaml": locked + "---\n" + automation("flux-system", ".", ""), "apps/cfg.yaml": markedFiles})
		def := m.Workloads[app]
		if def.Annotations[policy.Locked] != "true" || def.Annotations[policy.Automated] == "true" {
			t.Errorf("locked ImagePolicy: %v", def.Annotations)
		}
	})
}

// fluxctl lock writes its annotation on the ImagePolicy object.
func TestSetAnnotationsOnImagePolicy(t *testing.T) {
	t.Parallel()
	in := []byte(automationObjects)
	out, err := SetAnnotations(in, platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "app"}, map[string]string{policy.Locked: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "metadata: {annotations: {fluxd.io/locked: \"true\"}, name: app, namespace: flux-system}") {
		t.Errorf("the lock is not on the ImagePolicy:\n%s", out)
	}
}

// TestImagePolicyFixtures: the repository of each archive (every file
// but want and warnings) read as fluxd reads it gives the ImagePolicy
// services of "want" (one line per field: ID, "automated" when it is,
// field, image; an ID alone for a policy with none), and a warning
// holding each line of "warnings".
func TestImagePolicyFixtures(t *testing.T) {
	t.Parallel()
	for name, a := range fixtures(t, "automation") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := txtarFiles(a)
			repo := map[string]string{}
			for f, content := range files {
				if f != "want" && f != "warnings" {
					repo[f] = content
				}
			}
			m := automationRepo(t, repo)
			var got, warnings []string
			for _, id := range sortedIDs(m.Workloads) {
				def := m.Workloads[id]
				if def.ImagePolicy == nil {
					continue
				}
				warnings = append(warnings, def.Warnings...)
				auto := ""
				if def.Annotations[policy.Automated] == "true" {
					auto = " automated"
				}
				if len(def.Containers) == 0 {
					got = append(got, id.String()+auto)
				}
				for _, c := range def.Containers {
					got = append(got, id.String()+auto+" "+c.Name+" "+c.Image)
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(strings.Split(strings.TrimSpace(files["want"]), "\n"), got); diff != "" {
				t.Errorf("services (-want +got)\n%s", diff)
			}
			for _, w := range strings.Split(strings.TrimSpace(files["warnings"]), "\n") {
				if w != "" && !strings.Contains(strings.Join(warnings, "\n"), w) {
					t.Errorf("no warning %q in:\n%s", w, strings.Join(warnings, "\n"))
				}
			}
		})
	}
}
