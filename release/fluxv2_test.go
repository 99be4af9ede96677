package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"sort"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"golang.org/x/tools/txtar"
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

// fluxV2Files is a Flux v2 repository over reg/web: a Deployment whose
// image and a ConfigMap whose tag the ImagePolicy web marks, and a
// Deployment api that the release does not touch.
func fluxV2Files() map[string]string {
	return map[string]string{
		"flux.yaml": "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata: {name: web, namespace: flux-system}\nspec: {image: reg/web}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata: {name: web, namespace: flux-system}\nspec:\n  imageRepositoryRef: {name: web}\n  policy: {semver: {range: \">=1.0\"}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {name: auto, namespace: flux-system}\nspec: {update: {path: ./}}\n",
		"web.yaml":  strings.Replace(deployment("web", "reg/web:1.0"), "image: reg/web:1.0", `image: reg/web:1.0 # {"$imagepolicy": "flux-system:web"}`, 1),
		"cfg.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  TAG: \"1.0\" # {\"$imagepolicy\": \"flux-system:web:tag\"}\n",
	}
}

// A release of an ImagePolicy's service whose workload fails to apply is
// rolled back as any other: a revert commit puts every marked field back,
// comments kept, and the workload is applied again at its old image. The
// same holds for a job taken over after a restart.
func TestFluxV2ReleaseRollsBack(t *testing.T) {
	webPolicy := platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "web"}
	spec := Spec{Services: []platform.ID{webPolicy}, Image: "reg/web:1.2", User: "dana"}
	opts := ExecOptions{RolloutTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, RollbackOnFailure: true, JobID: "j1"}
	checkReverted := func(t *testing.T, g *realGit, cluster *refusingCluster) {
		t.Helper()
		if msg := gitCLI(t, g.bare, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(msg, "Revert release") {
			t.Errorf("the remote's last commit is %q; want the revert", msg)
		}
		for f, content := range fluxV2Files() {
			if got := g.remoteFile(t, f); got != strings.TrimRight(content, "\n") {
				t.Errorf("the remote's %s after the rollback is not the file before the release:\n%s", f, got)
			}
		}
		web := cluster.applied[id("web")]
		if len(web) == 0 || !strings.Contains(web[len(web)-1], "reg/web:1.0") {
			t.Errorf("web was not applied again at reg/web:1.0: %d applies", len(web))
		}
	}
	t.Run("release", func(t *testing.T) {
		g := newRealGit(t, fluxV2Files())
		cluster := &refusingCluster{refuse: id("web"), image: "reg/web:1.2", applied: map[platform.ID][]string{}}
		g.e.cluster = cluster
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := g.e.Execute(ctx, "team", spec, history.Release, opts)
		if err == nil || !strings.Contains(err.Error(), "applying default:deployment/web") || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("err = %v; want the failed apply, rolled back", err)
		}
		checkReverted(t, g, cluster)
	})
	t.Run("take-over", func(t *testing.T) {
		g := newRealGit(t, fluxV2Files())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.remoteFile(t, "cfg.yaml"); !strings.Contains(got, `TAG: "1.2" # {"$imagepolicy": "flux-system:web:tag"}`) {
			t.Fatalf("the release did not set the ConfigMap's tag:\n%s", got)
		}
		cluster := &refusingCluster{refuse: id("web"), image: "reg/web:1.2", applied: map[platform.ID][]string{}}
		g.e.cluster = cluster
		_, err = g.e.Resume(ctx, "team", spec, res.Plan, res.Commit, history.Release, opts)
		if err == nil || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("take-over: %v; want the failed apply, rolled back", err)
		}
		checkReverted(t, g, cluster)
	})
}

// An ImagePolicy's release never moves a workload locked in git: its
// marked image field is that workload's, and the lock says it holds. The
// automator's release skips the policy, saying which workload is locked;
// a release naming the policy is refused unless forced.
func TestFluxV2ReleaseLeavesLockedWorkload(t *testing.T) {
	t.Parallel()
	lock := func(t *testing.T, repo *recRepo) {
		t.Helper()
		p := filepath.Join(repo.dir, "apps/app.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), "metadata: {name: app}", "metadata: {name: app, annotations: {fluxd.io/locked: \"true\", fluxd.io/lock-message: \"incident 42\"}}", 1))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policyYAML := "  policy: {semver: {range: \">=1.0.0\"}}\n"
	t.Run("automated", func(t *testing.T) {
		e, repo, cluster := fluxV2Engine(t, policyYAML, []string{"1.0.0", "1.1.0"}, "1.0.0")
		lock(t, repo)
		spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
		res, err := e.Execute(context.Background(), "team-a", spec, history.AutomatedRelease, ExecOptions{})
		if err != nil && !strings.Contains(err.Error(), "nothing to release") {
			t.Fatal(err)
		}
		if res != nil && res.Plan.Updates() != 0 {
			t.Errorf("plan %+v; want the policy skipped: it would move the locked default:deployment/app", rows(res.Plan))
		}
		if res != nil && len(res.Plan.Items) == 1 && !strings.Contains(res.Plan.Items[0].Reason, "default:deployment/app") {
			t.Errorf("reason %q does not name the locked workload", res.Plan.Items[0].Reason)
		}
		if got := string(repo.files["apps/app.yaml"]); strings.Contains(got, "1.1.0") {
			t.Errorf("the locked Deployment's image was committed:\n%s", got)
		}
		if len(cluster.applied) != 0 {
			t.Errorf("applied %v; want nothing", cluster.applied)
		}
	})
	t.Run("named", func(t *testing.T) {
		e, repo, _ := fluxV2Engine(t, policyYAML, []string{"1.0.0", "1.1.0"}, "1.0.0")
		lock(t, repo)
		_, err := e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, Image: "reg/app:1.1.0", User: "dana"})
		if err == nil || !strings.Contains(err.Error(), "default:deployment/app") || !strings.Contains(err.Error(), "incident 42") {
			t.Fatalf("err = %v; want a refusal naming the locked workload and its lock", err)
		}
		p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, Image: "reg/app:1.1.0", User: "dana", Force: true})
		if err != nil || len(p.Items) != 1 || p.Items[0].Action != Update {
			t.Fatalf("forced: %v, plan %+v; want the policy released", err, p)
		}
	})
}

// A pinned ImagePolicy (fluxd.io/pin-digest on it) writes tag@digest
// where its field holds the whole image, and the tag alone where it holds
// the tag (a tag field cannot hold a digest; Flux v2 writes only the tag
// there too), never the digest's hex as a tag. Planned again on the
// released commit, it has nothing more to do.
func TestFluxV2PinnedPolicyTagField(t *testing.T) {
	t.Parallel()
	e, repo, _ := fluxV2Engine(t, "  policy: {semver: {range: \">=1.0.0\"}}\n", nil, "1.0.0")
	e.images = memImages{"reg/app": {{Repository: "reg/app", Tag: "1.0.0", Digest: dg('1')}, {Repository: "reg/app", Tag: "1.1.0", Digest: dg('2')}}}
	objects := filepath.Join(repo.dir, "flux/objects.yaml")
	b, err := os.ReadFile(objects)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "metadata: {name: app, namespace: flux-system}\nspec:\n  imageRepositoryRef",
		"metadata: {name: app, namespace: flux-system, annotations: {fluxd.io/pin-digest: \"true\"}}\nspec:\n  imageRepositoryRef", 1))
	if err := os.WriteFile(objects, b, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
	if _, err := e.Execute(context.Background(), "team-a", spec, history.AutomatedRelease, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	got := string(repo.files["apps/app.yaml"])
	for _, want := range []string{
		`image: reg/app:1.1.0@` + dg('2') + ` # {"$imagepolicy": "flux-system:app"}`,
		`TAG: "1.1.0" # {"$imagepolicy": "flux-system:app:tag"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the commit's apps/app.yaml lacks %s:\n%s", want, got)
		}
	}
	if err := os.WriteFile(filepath.Join(repo.dir, "apps/app.yaml"), repo.files["apps/app.yaml"], 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Updates() != 0 {
		t.Errorf("planned again on the released commit: %+v; want nothing to do", rows(p))
	}
}

// Flux v2's own layout keeps the image automation objects in a
// kustomization's directory, beside the workloads, with the marker on
// the kustomization's images: newTag. The ImagePolicy's service is then
// built by that kustomization too; its release sets the newTag, which is
// its own field, and moves the workload built from it, as in Flux v2
// (it is not refused as a release that would move its siblings).
func TestFluxV2PolicyInsideAKustomization(t *testing.T) {
	t.Parallel()
	g := newRealGit(t, map[string]string{
		"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml, image-automation.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\" # {\"$imagepolicy\": \"flux-system:web:tag\"}\n",
		"apps/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
		"apps/image-automation.yaml": `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: web, namespace: flux-system}
spec: {image: reg/web}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: web, namespace: flux-system}
spec:
  imageRepositoryRef: {name: web}
  policy: {semver: {range: ">=1.0"}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {name: auto, namespace: flux-system}
spec:
  update: {path: ./}
`,
	})
	webPolicy := platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "web"}
	spec := Spec{Services: []platform.ID{webPolicy}, AllLatest: true, User: "automator", Automated: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := g.e.Execute(ctx, "team-a", spec, history.AutomatedRelease, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Items) != 1 || res.Plan.Items[0].Action != Update {
		t.Fatalf("plan %+v; want the policy's newTag released", rows(res.Plan))
	}
	if got := g.remoteFile(t, "apps/kustomization.yaml"); !strings.Contains(got, `newTag: "1.2" # {"$imagepolicy": "flux-system:web:tag"}`) {
		t.Errorf("the remote's kustomization.yaml:\n%s", got)
	}
	if web := g.cluster.applied[id("web")]; !strings.Contains(web, "reg/web:1.2") {
		t.Errorf("applied %v; want default:deployment/web built with reg/web:1.2", g.cluster.applied)
	}
	// The Deployment released by hand is not refused for sharing the
	// kustomization with the policy's objects (as a Deployment whose
	// marked image is in a file of its own is not).
	res, err = g.e.Execute(ctx, "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.1", User: "dana"}, history.Release, ExecOptions{})
	if err != nil {
		t.Fatalf("releasing default:deployment/web by hand: %v", err)
	}
	if got := g.remoteFile(t, "apps/kustomization.yaml"); !strings.Contains(got, `newTag: "1.1"`) {
		t.Errorf("the remote's kustomization.yaml after the release by hand:\n%s", got)
	}
}

// A workload automated by its own annotation (Flux v1's, or fluxd's)
// whose image field an automated ImagePolicy marks has two automations of
// one field: fluxd's moves forward to the newest image, the policy sets
// its pick, older or not, and each would undo the other at every pass (a
// commit and a rollout each time). The policy's marker is the more
// specific: the workload's own automation leaves that field to it.
func TestFluxV2MarkedFieldIsNotAutomatedTwice(t *testing.T) {
	t.Parallel()
	e, repo, _ := fluxV2Engine(t, "  policy: {semver: {range: \"<2.0.0\"}}\n", []string{"1.9.0", "2.1.0"}, "1.9.0")
	p := filepath.Join(repo.dir, "apps/app.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "metadata: {name: app}", "metadata: {name: app, annotations: {fluxcd.io/automated: \"true\", fluxcd.io/tag.app: \"semver:*\"}}", 1))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dep := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{dep}, AllLatest: true, User: "automator", Automated: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Updates() != 0 {
		t.Errorf("the automated release of %s: %+v; want its field left to the ImagePolicy that marks it (which picks 1.9.0)", dep, rows(plan))
	}
	// Released by hand, it still moves.
	plan, err = e.Plan(context.Background(), Spec{Services: []platform.ID{dep}, Image: "reg/app:2.1.0", User: "dana"})
	if err != nil || plan.Updates() != 1 {
		t.Errorf("a release by hand: %v, %+v; want it planned", err, plan)
	}
}

// A marked field of an object that is not a workload (a ConfigMap) in a
// namespace outside the scope keeps the ImagePolicy's service out of it,
// as a workload there does: the release would edit that namespace's
// object in git (and the sync apply it), whatever file holds it.
func TestFluxV2ServiceScopeOtherNamespacesConfigMap(t *testing.T) {
	t.Parallel()
	e, repo, _ := fluxV2Engine(t, "  policy: {semver: {range: \">=1.0.0\"}}\n", []string{"1.0.0", "1.1.0"}, "1.0.0")
	file := filepath.Join(repo.Dir(), "apps/app.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "metadata: {name: cfg}", "metadata: {name: cfg, namespace: team-b}", 1))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	scope := auth.Scope{Namespaces: []string{"flux-system", "default"}, Paths: []string{"flux", "apps"}}
	p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, AllLatest: true, Scope: &scope})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 {
		t.Errorf("a scope of flux-system and default may release a policy that edits team-b's ConfigMap: plan %+v", rows(p))
	}
	scope.Namespaces = append(scope.Namespaces, "team-b")
	if p, err = e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, AllLatest: true, Scope: &scope}); err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 {
		t.Errorf("with team-b in the scope: plan %+v, want the policy's item", rows(p))
	}
}

// The same of a ConfigMap that is an item of a List: its namespace is the
// item's.
func TestFluxV2ServiceScopeOtherNamespacesListItem(t *testing.T) {
	t.Parallel()
	e, repo, _ := fluxV2Engine(t, "  policy: {semver: {range: \">=1.0.0\"}}\n", []string{"1.0.0", "1.1.0"}, "1.0.0")
	list := "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: cfg2, namespace: team-b}\n    data:\n      TAG: \"1.0.0\" # {\"$imagepolicy\": \"flux-system:app:tag\"}\n"
	if err := os.WriteFile(filepath.Join(repo.Dir(), "apps/list.yaml"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	scope := auth.Scope{Namespaces: []string{"flux-system", "default"}, Paths: []string{"flux", "apps"}}
	p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{appPolicy}, AllLatest: true, Scope: &scope})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 {
		t.Errorf("a scope of flux-system and default may release a policy that edits team-b's ConfigMap in a List: plan %+v", rows(p))
	}
}

// fluxctl lock on an ImagePolicy that sits in a kustomization's directory
// (Flux v2's usual layout, where the service is what the kustomization
// builds) writes the lock on the ImagePolicy in its own file, in one
// commit: the automator then leaves the policy's fields alone, and unlock
// puts the file back as it was.
func TestFluxV2LockImagePolicyInsideAKustomization(t *testing.T) {
	t.Parallel()
	const automation = `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: web, namespace: flux-system}
spec: {image: reg/web}
---
# The policy the team watches.
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: web
  namespace: flux-system
spec:
  imageRepositoryRef: {name: web}
  policy: {semver: {range: ">=1.0"}} # any release
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {name: auto, namespace: flux-system}
spec:
  update: {path: ./}
`
	g := newRealGit(t, map[string]string{
		"apps/kustomization.yaml":    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml, image-automation.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\" # {\"$imagepolicy\": \"flux-system:web:tag\"}\n",
		"apps/deployment.yaml":       "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
		"apps/image-automation.yaml": automation,
	})
	webPolicy := platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "web"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock := map[string]string{AnnotationLocked: "true", AnnotationLockMessage: "incident 9", AnnotationLockedBy: "dana", AnnotationLockedAt: "2026-12-01T15:00:00Z"}
	commit, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: webPolicy, Set: lock, Type: history.Lock, User: "dana"})
	if err != nil || commit == "" {
		t.Fatalf("lock = %q, %v; want a commit", commit, err)
	}
	got := g.remoteFile(t, "apps/image-automation.yaml")
	for _, want := range []string{`fluxd.io/locked: "true"`, `fluxd.io/lock-message: "incident 9"`, "# The policy the team watches.", "# any release"} {
		if !strings.Contains(got, want) {
			t.Errorf("after the lock, apps/image-automation.yaml lacks %q:\n%s", want, got)
		}
	}
	if k := g.remoteFile(t, "apps/kustomization.yaml"); strings.Contains(k, "fluxd.io/") {
		t.Errorf("the lock was written in the kustomization:\n%s", k)
	}
	_, m, err := g.e.manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if def := m.Workloads[webPolicy]; def == nil || def.Annotations[AnnotationLocked] != "true" {
		t.Fatalf("read back, %s is not locked: %+v", webPolicy, def)
	}
	// The automator leaves a locked policy's fields alone.
	res, err := g.e.Execute(ctx, "team", Spec{Services: []platform.ID{webPolicy}, AllLatest: true, User: "automator", Automated: true}, history.AutomatedRelease, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Items) != 1 || res.Plan.Items[0].Action == Update {
		t.Errorf("plan of the locked policy %+v; want it skipped", rows(res.Plan))
	}
	if k := g.remoteFile(t, "apps/kustomization.yaml"); !strings.Contains(k, `newTag: "1.0"`) {
		t.Errorf("the locked policy's newTag moved:\n%s", k)
	}

	unlock := map[string]string{AnnotationLocked: "", AnnotationLockMessage: "", AnnotationLockedBy: "", AnnotationLockedAt: ""}
	if _, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: webPolicy, Set: unlock, Type: history.Unlock, User: "dana"}); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if got := g.remoteFile(t, "apps/image-automation.yaml"); got != strings.TrimSpace(automation) {
		t.Errorf("after lock and unlock, apps/image-automation.yaml is not as it was:\n%s\nwant:\n%s", got, automation)
	}
}

// SoleInstance: the one instance whose scope holds the work, else the
// default, whether none or several hold it.
func TestSoleInstance(t *testing.T) {
	a, b := &auth.Scope{}, &auth.Scope{}
	holdsOnly := func(want ...*auth.Scope) func(*auth.Scope) bool {
		return func(sc *auth.Scope) bool {
			for _, w := range want {
				if sc == w {
					return true
				}
			}
			return false
		}
	}
	insts := map[string]*auth.Scope{"team-a": a, "team-b": b}
	for _, c := range []struct {
		name  string
		holds func(*auth.Scope) bool
		want  string
	}{
		{"one holds it", holdsOnly(a), "team-a"},
		{"the other holds it", holdsOnly(b), "team-b"},
		{"both hold it", holdsOnly(a, b), "default"},
		{"none holds it", holdsOnly(), "default"},
	} {
		if got := SoleInstance(insts, c.holds, "default"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := SoleInstance(nil, holdsOnly(a), "default"); got != "default" {
		t.Errorf("no instances: %q", got)
	}
}

// TestFluxV2Layouts runs the automator's release of flux-system:app over
// each repository in testdata/fluxv2 (an archive named after the layout
// and the Flux v2 rule it checks): "tags" are reg/app's tags and digests
// (TAG DIGEST, oldest first); the commit must hold each want/ file byte
// for byte, and exactly the workloads of "applied" are applied. The
// commit passes the render check, so what moved is what was planned.
func TestFluxV2Layouts(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "fluxv2", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			t.Parallel()
			e, repo, cluster, files := layoutEngine(t, p, nil)
			spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
			res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Plan.Updates() == 0 {
				t.Fatalf("nothing planned: %+v", rows(res.Plan))
			}
			for f, want := range files {
				if name, ok := strings.CutPrefix(f, "want/"); ok {
					if diff := cmp.Diff(want, string(repo.files[name])); diff != "" {
						t.Errorf("the commit's %s (-want +got)\n%s", name, diff)
					}
				}
			}
			var applied []string
			for id := range cluster.applied {
				applied = append(applied, id.String())
			}
			sort.Strings(applied)
			if diff := cmp.Diff(strings.Split(strings.TrimSpace(files["applied"]), "\n"), applied); diff != "" {
				t.Errorf("applied (-want +got)\n%s", diff)
			}
		})
	}
}

// layoutEngine is an engine over the repository of the archive at path
// (see TestFluxV2Layouts), with edit applied to its files first; files
// are the archive's.
func layoutEngine(t *testing.T, path string, edit func(map[string]string)) (*Engine, *recRepo, *recCluster, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range txtar.Parse(b).Files {
		files[f.Name] = string(f.Data)
	}
	if edit != nil {
		edit(files)
	}
	dir := t.TempDir()
	var imgs []registry.Image
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for f, content := range files {
		switch {
		case f == "tags":
			for i, line := range strings.Split(strings.TrimSpace(content), "\n") {
				tag, digest, _ := strings.Cut(line, " ")
				imgs = append(imgs, registry.Image{Repository: "reg/app", Tag: tag, Digest: digest, CreatedAt: t0.Add(time.Duration(i) * time.Hour)})
			}
		case f == "applied" || strings.HasPrefix(f, "want/"):
		default:
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{applied: map[platform.ID]string{}}
	e := NewEngine(repo, memImages{"reg/app": imgs}, cluster, &recRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return e, repo, cluster, files
}

// A marker on a shared base's images: entry moves every overlay built
// from it, so a lock on any of them holds the policy, and a scoped
// instance holds the policy only with every one of them.
func TestFluxV2BaseMarkerLocksAndScopes(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "fluxv2", "base-and-overlays.txtar")
	t.Run("a locked overlay holds the automated release", func(t *testing.T) {
		t.Parallel()
		e, repo, cluster, _ := layoutEngine(t, fixture, func(files map[string]string) {
			files["apps/prod/kustomization.yaml"] += "commonAnnotations:\n  fluxd.io/locked: \"true\"\n"
		})
		spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
		res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Updates() != 0 || repo.files != nil || len(cluster.applied) != 0 {
			t.Fatalf("a policy whose base moves a locked overlay was released: %+v, committed %v", rows(res.Plan), repo.files)
		}
		if r := res.Plan.Items[0].Reason; !strings.Contains(r, "prod:deployment/prod-app") {
			t.Errorf("the skip's reason %q does not name the locked overlay", r)
		}
	})
	t.Run("a scope without one overlay's namespace does not hold the policy", func(t *testing.T) {
		t.Parallel()
		e, _, _, _ := layoutEngine(t, fixture, nil)
		dirs, err := gitrepo.ResolvePaths(e.repo.Dir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gitrepo.FindWorkloads(e.repo.Dir(), dirs)
		if err != nil {
			t.Fatal(err)
		}
		def := m.Workloads[appPolicy]
		all := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "prod", "pinned"}}
		if !InScope(all, appPolicy, def, m) {
			t.Errorf("a scope of every namespace does not hold the policy")
		}
		// pinned sets its own tag: the base does not move it.
		noPinned := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "prod"}}
		if !InScope(noPinned, appPolicy, def, m) {
			t.Errorf("the policy needs the namespace of an overlay it does not move")
		}
		noProd := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "pinned"}}
		if InScope(noProd, appPolicy, def, m) {
			t.Errorf("a scope without prod holds a policy whose base moves prod's Deployment")
		}
	})
}

// Flux v2's digestReflectionPolicy when a tag is pushed again with new
// content (its digest moves, the tag does not): IfNotPresent keeps the
// digest a field holds until the tag changes; Always writes the new one.
func TestFluxV2DigestReflectionOnAMovedTag(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "fluxv2", "digest-reflection.txtar")
	const moved = "sha256:1001000000000000000000000000000000000000000000000000000000000000"
	for _, c := range []struct {
		policy  string
		release bool
	}{{"IfNotPresent", false}, {"Always", true}} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			e, repo, _, _ := layoutEngine(t, fixture, func(files map[string]string) {
				files["tags"] = "1.0.0 " + moved + "\n"
				files["flux/objects.yaml"] = strings.Replace(files["flux/objects.yaml"], "digestReflectionPolicy: IfNotPresent", "digestReflectionPolicy: "+c.policy, 1)
			})
			spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
			res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := string(repo.files["apps/plain/app.yaml"])
			switch {
			case !c.release && (res.Plan.Updates() != 0 || repo.files != nil):
				t.Errorf("IfNotPresent released a moved digest of the same tag: %+v", rows(res.Plan))
			case c.release && (!strings.Contains(got, "reg/app:1.0.0@"+moved) || !strings.Contains(got, "digest: "+moved)):
				t.Errorf("Always did not write the moved digest in the whole-image and :digest fields:\n%s", got)
			}
		})
	}
}
