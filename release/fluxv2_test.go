package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// fluxV2Engine is an engine over a directory written for Flux v2: one
// ImagePolicy with policy (YAML under spec.policy and filterTags), an
// automation of the whole repository, a Deployment whose image and a
// ConfigMap whose tag it marks. tags are the registry's tags of reg/app.
func fluxV2Engine(t *testing.T, policyYAML string, tags []string, current string) (*Engine, *recRepo, *recCluster) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"flux/objects.yaml": `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: app, namespace: flux-system}
spec: {image: reg/app}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: app, namespace: flux-system}
spec:
  imageRepositoryRef: {name: app}
` + policyYAML + `---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {name: auto, namespace: flux-system}
spec:
  update: {path: ./apps}
  git: {commit: {author: {name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}}
`,
		"apps/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  template:
    spec:
      containers:
        - name: app
          image: reg/app:` + current + ` # {"$imagepolicy": "flux-system:app"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data:
  TAG: "` + current + `" # {"$imagepolicy": "flux-system:app:tag"}
`,
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var imgs []registry.Image
	for _, tag := range tags {
		imgs = append(imgs, registry.Image{Repository: "reg/app", Tag: tag})
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{applied: map[platform.ID]string{}}
	return NewEngine(repo, memImages{"reg/app": imgs}, cluster, &recRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil))), repo, cluster
}

var appPolicy = platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "app"}

// Each case is named after the Flux v2 rule it checks: the automation sets
// every marked field to the tag the ImagePolicy picks.
func TestFluxV2AutomatedRelease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		policy  string
		tags    []string
		current string
		want    string
	}{
		{"semver picks the highest version in range", "  policy: {semver: {range: \"~1.2\"}}\n", []string{"1.2.0", "1.2.9", "1.3.0"}, "1.2.0", "1.2.9"},
		{"alphabetical desc picks the first name", "  policy: {alphabetical: {order: desc}}\n", []string{"bionic", "focal", "jammy"}, "jammy", "bionic"},
		{"numerical with filterTags extract ranks the build number", "  filterTags: {pattern: '^main-[a-f0-9]+-(?P<ts>[0-9]+)$', extract: '$ts'}\n  policy: {numerical: {order: asc}}\n",
			[]string{"main-abc-100", "main-def-99", "main-0ff-1000", "pr-1-5000"}, "main-abc-100", "main-0ff-1000"},
		{"the policy's pick is written even when it is older than what git holds", "  policy: {semver: {range: \"<2.0.0\"}}\n", []string{"1.9.0", "2.1.0"}, "2.1.0", "1.9.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, repo, cluster := fluxV2Engine(t, c.policy, c.tags, c.current)
			spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
			res, err := e.Execute(context.Background(), "team-a", spec, history.AutomatedRelease, ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Plan.Updates() != 2 {
				t.Fatalf("plan %+v, want both marked fields updated", rows(res.Plan))
			}
			got := string(repo.files["apps/app.yaml"])
			for _, want := range []string{
				`image: reg/app:` + c.want + ` # {"$imagepolicy": "flux-system:app"}`,
				`TAG: "` + c.want + `" # {"$imagepolicy": "flux-system:app:tag"}`,
			} {
				if !strings.Contains(got, want) {
					t.Errorf("the commit's apps/app.yaml lacks %s:\n%s", want, got)
				}
			}
			if diff := cmp.Diff(gitrepo.Signature{Name: "fluxcdbot", Email: "fluxcdbot@users.noreply.github.com"}, repo.author); diff != "" {
				t.Errorf("author (-want +got)\n%s", diff)
			}
			// The Deployment holding a marked field is applied; the
			// ImagePolicy itself is not.
			dep := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
			if !strings.Contains(cluster.applied[dep], "reg/app:"+c.want) {
				t.Errorf("applied %v, want %s with the new image", cluster.applied, dep)
			}
			if _, ok := cluster.applied[appPolicy]; ok {
				t.Errorf("the ImagePolicy was applied as a workload")
			}
		})
	}
}

// A tenant's instance sees an ImagePolicy's service only when every
// field it marks, and every workload it would apply, is in its scope.
func TestFluxV2ServiceScope(t *testing.T) {
	t.Parallel()
	e, _, _ := fluxV2Engine(t, "  policy: {semver: {range: \">=1.0.0\"}}\n", []string{"1.0.0", "1.1.0"}, "1.0.0")
	for _, c := range []struct {
		name  string
		scope auth.Scope
		items int
	}{
		{"the policy's files only", auth.Scope{Namespaces: []string{"flux-system", "default"}, Paths: []string{"flux"}}, 0},
		{"the policy's namespace only", auth.Scope{Namespaces: []string{"flux-system"}}, 0},
		{"everything it touches", auth.Scope{Namespaces: []string{"flux-system", "default"}, Paths: []string{"flux", "apps"}}, 1},
	} {
		scope := c.scope
		p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, AllLatest: true, Scope: &scope})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != c.items {
			t.Errorf("%s: plan %+v, want %d items", c.name, rows(p), c.items)
		}
	}
}
