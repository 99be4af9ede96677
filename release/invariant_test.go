package release

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// git runs the git CLI, a second, independent client of the remote.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=dana", "GIT_AUTHOR_EMAIL=dana@example.invalid", "GIT_COMMITTER_NAME=dana", "GIT_COMMITTER_EMAIL=dana@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// personPushes pushes files to the remote as someone other than fluxd.
func personPushes(t *testing.T, remote, message string, files map[string]string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "person")
	git(t, "", "clone", "-q", "-b", "main", remote, clone)
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(clone, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, clone, "add", f)
	}
	git(t, clone, "commit", "-q", "-m", message)
	git(t, clone, "push", "-q", "origin", "main")
	return git(t, clone, "rev-parse", "HEAD")
}

// racingRepo is a real clone of a real bare remote, where a person's push
// can land just before fluxd's next one.
type racingRepo struct {
	*gogit.Repo
	before func()
}

func (r *racingRepo) Push(ctx context.Context, commit string) error {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	return r.Repo.Push(ctx, commit)
}

// gitEngine is an engine on a real git remote holding apps.yaml
// (appsYAML) and notes.md.
func gitEngine(t *testing.T) (*Engine, *racingRepo, string, *recRecorder) {
	t.Helper()
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, "", "init", "-q", "--bare", "-b", "main", remote)
	seed := filepath.Join(t.TempDir(), "seed")
	git(t, "", "clone", "-q", remote, seed)
	git(t, seed, "checkout", "-q", "-b", "main")
	os.WriteFile(filepath.Join(seed, "apps.yaml"), []byte(appsYAML), 0o644)
	os.WriteFile(filepath.Join(seed, "notes.md"), []byte("notes\n"), 0o644)
	git(t, seed, "add", ".")
	git(t, seed, "commit", "-q", "-m", "Seed")
	git(t, seed, "push", "-q", "origin", "main")
	r, err := gogit.Open(context.Background(), gogit.Config{URL: "file://" + remote, Branch: "main", User: "fluxd", Email: "fluxd@example.invalid", Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	repo := &racingRepo{Repo: r}
	e, _, cluster, rec := newTestEngine(t)
	e.repo, e.cluster = repo, cluster
	return e, repo, "file://" + remote, rec
}

func remoteFile(t *testing.T, remote, path string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "look")
	git(t, "", "clone", "-q", "-b", "main", remote, clone)
	return git(t, clone, "show", "HEAD:"+path)
}

func TestAHotfixPushedDuringAReleaseIsNeverOverwritten(t *testing.T) {
	e, repo, remote, rec := gitEngine(t)
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "quinn"}
	plan, err := e.Plan(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	hotfix := strings.Replace(appsYAML, "image: reg/web:1.0 # pinned", "image: reg/web:1.0-hotfix", 1)
	hotfix = strings.Replace(hotfix, "  name: web\n", "  name: web\n  annotations:\n    fluxd.io/locked: \"true\"\n", 1)
	var person string
	repo.before = func() { person = personPushes(t, remote, "Hotfix web", map[string]string{"apps.yaml": hotfix}) }
	_, err = e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{Checksum: plan.Checksum})
	if err == nil {
		t.Fatal("the release succeeded over the hotfix")
	}
	for _, want := range []string{"nothing was pushed", "Hotfix web", "dana", person[:12]} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if got := remoteFile(t, remote, "apps.yaml"); got != strings.TrimSpace(hotfix) {
		t.Errorf("git lost the hotfix:\n%s", got)
	}
	if n := len(rec.events); n != 1 || rec.events[0].Type != history.Failed {
		t.Errorf("history: %+v; want one failed release", rec.events)
	}
}

func TestAnUnrelatedPushDuringAReleaseIsKeptAndTheReleaseGoesOn(t *testing.T) {
	e, repo, remote, _ := gitEngine(t)
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "quinn"}
	plan, err := e.Plan(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	repo.before = func() { personPushes(t, remote, "Notes", map[string]string{"notes.md": "more notes\n"}) }
	res, err := e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{Checksum: plan.Checksum})
	if err != nil {
		t.Fatal(err)
	}
	if got := remoteFile(t, remote, "notes.md"); got != "more notes" {
		t.Errorf("the other push was lost: %q", got)
	}
	if got := remoteFile(t, remote, "apps.yaml"); !strings.Contains(got, "image: reg/web:1.2 # pinned") {
		t.Errorf("the release is not in git:\n%s", got)
	}
	clone := filepath.Join(t.TempDir(), "log")
	git(t, "", "clone", "-q", "-b", "main", remote, clone)
	if got := git(t, clone, "log", "--format=%s", "-2"); !strings.HasPrefix(got, "Release reg/web:1.2") || !strings.HasSuffix(got, "Notes") {
		t.Errorf("log: %q; want the release on top of the other push", got)
	}
	if res.Commit == "" {
		t.Error("no commit")
	}
}

// A service of an automated batch that was locked, or de-automated, while
// the job waited is left out; the rest is released.
func TestAutomatedBatchDropsWhatNoLongerQualifies(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	automate(t, repo.Dir(), id("web"), id("frozen"))
	// current is not automated (any more); frozen is automated but locked.
	spec := Spec{Services: []platform.ID{id("web"), id("current"), id("frozen")}, AllLatest: true, User: "fluxd", Automated: true}
	res, err := e.Execute(context.Background(), "team-a", spec, history.AutomatedRelease, ExecOptions{})
	if err != nil {
		t.Fatalf("the batch failed: %v", err)
	}
	got := map[string]string{}
	for _, it := range res.Plan.Items {
		got[it.Service.Name] = string(it.Action) + " " + it.Reason
	}
	if !strings.HasPrefix(got["web"], "update") || !strings.Contains(got["current"], ReasonNotAutomated) || !strings.Contains(got["frozen"], "locked") {
		t.Errorf("plan: %v", got)
	}
	if !strings.Contains(repo.message, "default:deployment/web") || strings.Contains(repo.message, "deployment/current") || strings.Contains(repo.message, "deployment/frozen") {
		t.Errorf("commit message:\n%s", repo.message)
	}
}

const kustBase = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
ANNOTATIONS
spec:
  template:
    spec:
      containers:
        - name: app
          image: reg/web:1.0
`

// A kustomize release that would move a sibling sharing its images:
// entry: refused naming it (and its lock) when named, skipped with that
// reason under --all, and released together when both are planned to the
// same image.
func TestKustomizeSiblingsMoveTogetherOrNotAtAll(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	dir := repo.Dir()
	os.Remove(filepath.Join(dir, "apps.yaml"))
	write := func(f, b string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prod/base/kustomization.yaml", "resources: [kweb.yaml, kapi.yaml]\n")
	write("prod/base/kweb.yaml", strings.NewReplacer("NAME", "kweb", "ANNOTATIONS\n", "").Replace(kustBase))
	write("prod/base/kapi.yaml", strings.NewReplacer("NAME", "kapi", "ANNOTATIONS", "  annotations: {fluxd.io/locked: \"true\", fluxd.io/lock-message: freeze}").Replace(kustBase))
	write("prod/kustomization.yaml", "resources: [base]\n")
	ctx := context.Background()

	_, err := e.Plan(ctx, Spec{Services: []platform.ID{id("kweb")}, Image: "reg/web:1.2"})
	var fe *fluxerr.Error
	if !errors.As(err, &fe) || fe.Kind != fluxerr.Precondition || !strings.Contains(err.Error(), "default:deployment/kapi (locked: freeze)") {
		t.Errorf("releasing kweb alone: %v", err)
	}
	p, err := e.Plan(ctx, Spec{All: true, Image: "reg/web:1.2"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range p.Items {
		got[it.Service.Name] = string(it.Action) + " " + it.Reason
	}
	if !strings.HasPrefix(got["kweb"], "skip") || !strings.Contains(got["kweb"], "kapi") || !strings.Contains(got["kapi"], "locked") {
		t.Errorf("--all: %v", got)
	}
	// Unlocked, both released at once.
	write("prod/base/kapi.yaml", strings.NewReplacer("NAME", "kapi", "ANNOTATIONS\n", "").Replace(kustBase))
	res, err := e.Execute(ctx, "team-a", Spec{All: true, Image: "reg/web:1.2", User: "quinn"}, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Updates() != 2 || !strings.Contains(string(repo.files["prod/kustomization.yaml"]), "newTag: \"1.2\"") {
		t.Errorf("both released: %d updates, kustomization:\n%s", res.Plan.Updates(), repo.files["prod/kustomization.yaml"])
	}
}

// A rollback reverts only what git still holds at the release's image:
// a person's fix pushed since the release is never overwritten by it.
func TestARollbackNeverOverwritesALaterFix(t *testing.T) {
	e, _, remote, _ := gitEngine(t)
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "quinn"}
	res, err := e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.Replace(appsYAML, "image: reg/web:1.0 # pinned", "image: reg/web:1.2-fix", 1)
	personPushes(t, remote, "Fix web", map[string]string{"apps.yaml": fixed})
	_, err = (&run{e: e, instance: "team-a", spec: spec}).rollback(ctx, res.Plan, res.Commit, errors.New("the rollout failed"))
	if !errors.Is(err, gitrepo.ErrConflict) {
		t.Errorf("rollback over a later fix: %v; want a conflict", err)
	}
	if got := remoteFile(t, remote, "apps.yaml"); got != strings.TrimSpace(fixed) {
		t.Errorf("git lost the fix:\n%s", got)
	}
}

// An automated batch whose push meets a lock pushed meanwhile plans again
// at the new head: the locked service is dropped, the rest released.
func TestAutomatedBatchMeetsALockDuringItsPush(t *testing.T) {
	e, repo, remote, _ := gitEngine(t)
	ctx := context.Background()
	automated := appsYAML
	for _, svc := range []platform.ID{id("web"), id("current")} {
		b, err := gitrepo.SetAnnotations([]byte(automated), svc, map[string]string{AnnotationAutomated: "true"})
		if err != nil {
			t.Fatal(err)
		}
		automated = string(b)
	}
	personPushes(t, remote, "Automate web and current", map[string]string{"apps.yaml": automated})
	locked, err := gitrepo.SetAnnotations([]byte(automated), id("current"), map[string]string{AnnotationLocked: "true"})
	if err != nil {
		t.Fatal(err)
	}
	repo.before = func() { personPushes(t, remote, "Lock current", map[string]string{"apps.yaml": string(locked)}) }
	spec := Spec{Services: []platform.ID{id("web"), id("current")}, AllLatest: true, User: "fluxd", Automated: true}
	res, err := e.Execute(ctx, "team-a", spec, history.AutomatedRelease, ExecOptions{})
	if err != nil {
		t.Fatalf("the batch failed: %v", err)
	}
	got := remoteFile(t, remote, "apps.yaml")
	if !strings.Contains(got, "image: reg/web:1.2 # pinned") || !strings.Contains(got, "image: reg/web:1.1\n") {
		t.Errorf("want web released and current (locked) left alone:\n%s", got)
	}
	if res.Plan.Updates() != 1 {
		t.Errorf("executed plan: %+v", res.Plan.Items)
	}
}

// A scoped caller's kustomize release that a sibling outside its scope
// blocks is refused (or skipped) without naming that sibling or its lock
// message: to the caller, a service outside its scope does not exist.
func TestKustomizeSiblingsOutsideTheScopeAreNotNamed(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	dir := repo.Dir()
	os.Remove(filepath.Join(dir, "apps.yaml"))
	write := func(f, b string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prod/kustomization.yaml", "resources: [kweb.yaml, kapi.yaml]\n")
	write("prod/kweb.yaml", strings.NewReplacer("NAME", "kweb", "ANNOTATIONS\n", "").Replace(kustBase))
	write("prod/kapi.yaml", strings.NewReplacer("NAME", "kapi\n  namespace: team-b", "ANNOTATIONS", "  annotations: {fluxd.io/locked: \"true\", fluxd.io/lock-message: incident-4711}").Replace(kustBase))
	scope := &auth.Scope{Namespaces: []string{"default"}}
	ctx := context.Background()
	_, err := e.Plan(ctx, Spec{Services: []platform.ID{id("kweb")}, Image: "reg/web:1.2", Scope: scope})
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("releasing kweb alone: %v; want a refusal saying a service outside the scope shares its entry", err)
	}
	if strings.Contains(err.Error(), "kapi") || strings.Contains(err.Error(), "team-b") || strings.Contains(err.Error(), "incident-4711") {
		t.Errorf("the refusal names what is outside the caller's scope: %v", err)
	}
	p, err := e.Plan(ctx, Spec{All: true, Image: "reg/web:1.2", Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		if it.Service.Name == "kapi" || strings.Contains(it.Reason, "kapi") || strings.Contains(it.Reason, "incident-4711") {
			t.Errorf("--all by a scoped caller: %s %s %s", it.Service, it.Action, it.Reason)
		}
	}
	// Unscoped, the sibling is named with its lock.
	if _, err := e.Plan(ctx, Spec{Services: []platform.ID{id("kweb")}, Image: "reg/web:1.2"}); err == nil || !strings.Contains(err.Error(), "team-b:deployment/kapi (locked: incident-4711)") {
		t.Errorf("unscoped: %v", err)
	}
}
