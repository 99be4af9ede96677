package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"regexp"
	"sync"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/syncer"
)

const appsYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.0 # pinned
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: frozen
  annotations:
    fluxd.io/locked: "true"
    fluxd.io/lock-message: "incident 7"
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.0
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: current
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.1
        - name: db
          image: reg/db:5
`

// recRepo is a directory repo that records what would be pushed.
type recRepo struct {
	dirRepo
	files   map[string][]byte
	message string
	author  gitrepo.Signature
}

func (r *recRepo) Commit(_ context.Context, base string, files map[string][]byte, msg string, author gitrepo.Signature) (string, error) {
	r.files, r.message, r.author = files, msg, author
	return "c0ffee", nil
}

func (r *recRepo) Push(context.Context, string) error { return nil }

type recCluster struct {
	workloads []platform.Workload
	applied   map[platform.ID]string
}

func (c *recCluster) Workloads(context.Context) ([]platform.Workload, error) { return c.workloads, nil }
func (c *recCluster) Diagnose(context.Context, platform.ID) string           { return "" }

func (c *recCluster) Apply(_ context.Context, id platform.ID, m []byte) (int64, error) {
	c.applied[id] = string(m)
	return 1, nil
}

type recRecorder struct{ events []history.Event }

func (r *recRecorder) Record(_ context.Context, ev history.Event) (int64, error) {
	r.events = append(r.events, ev)
	return int64(len(r.events)), nil
}

func id(name string) platform.ID {
	return platform.ID{Namespace: "default", Kind: "deployment", Name: name}
}

func newTestEngine(t *testing.T) (*Engine, *recRepo, *recCluster, *recRecorder) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{
		"reg/web": {{Repository: "reg/web", Tag: "1.2", CreatedAt: t0.Add(2 * time.Hour)}, {Repository: "reg/web", Tag: "1.1", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/web", Tag: "1.0", CreatedAt: t0}},
		"reg/db":  {{Repository: "reg/db", Tag: "5", CreatedAt: t0}},
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{workloads: []platform.Workload{{ID: id("drift")}, {ID: id("web")}}, applied: map[platform.ID]string{}}
	rec := &recRecorder{}
	return NewEngine(repo, images, cluster, rec, slog.New(slog.NewTextHandler(io.Discard, nil))), repo, cluster, rec
}

type row struct{ Service, Action, Reason, Updates string }

func rows(p *Plan) []row {
	var out []row
	for _, it := range p.Items {
		var u []string
		for _, c := range it.Updates {
			u = append(u, c.Container+":"+c.Current+"->"+c.Target)
		}
		out = append(out, row{it.Service.Name, string(it.Action), it.Reason, strings.Join(u, ",")})
	}
	return out
}

func TestPlan(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec Spec
		want []row
	}{
		{"all latest", Spec{All: true, AllLatest: true}, []row{
			{"current", "update", "", "web:reg/web:1.1->reg/web:1.2"},
			{"drift", "skip", ReasonNotInGit, ""},
			{"frozen", "skip", "locked: incident 7", ""},
			{"web", "update", "", "web:reg/web:1.0->reg/web:1.2"},
		}},
		{"one image to all", Spec{All: true, Image: "reg/web:1.1", Exclude: []platform.ID{id("web")}}, []row{
			{"current", "uptodate", "container web already uses reg/web:1.1", ""},
			{"drift", "skip", ReasonNotInGit, ""},
			{"frozen", "skip", "locked: incident 7", ""},
			{"web", "skip", ReasonExcluded, ""},
		}},
		{"no tag: the newest", Spec{Services: []platform.ID{id("web")}, Image: "reg/web"}, []row{
			{"web", "update", "", "web:reg/web:1.0->reg/web:1.2"},
		}},
		{"unused repository", Spec{Services: []platform.ID{id("web")}, Image: "reg/db:5"}, []row{
			{"web", "skip", ReasonNotUsed, ""},
		}},
		// A scoped instance's release of all: only what is in its scope.
		{"all latest, scope of another namespace", Spec{All: true, AllLatest: true, Scope: &auth.Scope{Namespaces: []string{"team-b"}}}, nil},
		{"all latest, scope of another path", Spec{All: true, AllLatest: true, Scope: &auth.Scope{Namespaces: []string{"default"}, Paths: []string{"teams/b"}}}, []row{
			{"drift", "skip", ReasonNotInGit, ""}, // only in the cluster: in scope by namespace
		}},
		{"all latest, scope of the file", Spec{All: true, AllLatest: true, Scope: &auth.Scope{Namespaces: []string{"default"}, Paths: []string{"apps.yaml"}}}, []row{
			{"current", "update", "", "web:reg/web:1.1->reg/web:1.2"},
			{"drift", "skip", ReasonNotInGit, ""},
			{"frozen", "skip", "locked: incident 7", ""},
			{"web", "update", "", "web:reg/web:1.0->reg/web:1.2"},
		}},
		{"named service outside the scope", Spec{Services: []platform.ID{id("web")}, AllLatest: true, Scope: &auth.Scope{Namespaces: []string{"team-b"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.Plan(ctx, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rows(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanMissingImageFailsAtOnce(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	_, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.3"})
	if fluxerr.KindOf(err) != fluxerr.Missing || !strings.Contains(err.Error(), "image reg/web:1.3 not found in docker.io") || !strings.Contains(err.Error(), "closest tags that do exist: 1.2, 1.1, 1.0") {
		t.Fatalf("err = %v", err)
	}
}

func TestPlanLockedNamedService(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	_, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("frozen")}, Image: "reg/web:1.2"})
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "is locked: incident 7") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("err = %v", err)
	}
	p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("frozen")}, Image: "reg/web:1.2", Force: true})
	if err != nil || p.Updates() != 1 {
		t.Fatalf("--force: %v, %v", p, err)
	}
}

func TestSpecValidate(t *testing.T) {
	for _, s := range []Spec{{}, {All: true}, {All: true, Image: "Bad Ref"}, {All: true, Image: "a:1", AllLatest: true}, {All: true, AllLatest: true, Message: "why\nFluxd-Job: 0123456789abcdef"}} {
		if err := s.Validate(); fluxerr.KindOf(err) != fluxerr.User {
			t.Errorf("Validate(%+v) = %v; want a user error", s, err)
		}
	}
}

func TestExecute(t *testing.T) {
	e, repo, cluster, rec := newTestEngine(t)
	res, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web"), id("current")}, AllLatest: true, User: "dana", Message: "why not"}, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != "c0ffee" {
		t.Errorf("commit = %q", res.Commit)
	}
	want := strings.Replace(appsYAML, "image: reg/web:1.0 # pinned", "image: reg/web:1.2 # pinned", 1)
	want = strings.Replace(want, "image: reg/web:1.1", "image: reg/web:1.2", 1)
	if diff := cmp.Diff(want, string(repo.files["apps.yaml"])); diff != "" {
		t.Errorf("edited file (-want +got):\n%s", diff)
	}
	wantMsg := "Release reg/web:1.2 to team-a by dana\n\nwhy not\n\ndefault:deployment/current\n  web: reg/web:1.1 -> reg/web:1.2\n\ndefault:deployment/web\n  web: reg/web:1.0 -> reg/web:1.2\n"
	if diff := cmp.Diff(wantMsg, repo.message); diff != "" {
		t.Errorf("commit message (-want +got):\n%s", diff)
	}
	if repo.author.Name != "dana" {
		t.Errorf("author = %+v", repo.author)
	}
	if len(cluster.applied) != 2 || !strings.Contains(cluster.applied[id("web")], "reg/web:1.2") || strings.Contains(cluster.applied[id("web")], "frozen") {
		t.Errorf("applied = %v", cluster.applied)
	}
	if len(rec.events) != 1 || rec.events[0].Type != history.Release || rec.events[0].Commit != "c0ffee" || len(rec.events[0].Changes) != 2 || rec.events[0].Instance != "team-a" {
		t.Errorf("history = %+v", rec.events)
	}
}

// movingRepo refuses the first push because "someone else" pushed a
// commit that adds a comment line to the file.
type movingRepo struct {
	dirRepo
	rev     string
	pushes  int
	commits []string // base revisions of the commits made
	last    map[string][]byte
}

func (r *movingRepo) Sync(context.Context) (string, error) { return r.rev, nil }

func (r *movingRepo) Commit(_ context.Context, base string, files map[string][]byte, _ string, _ gitrepo.Signature) (string, error) {
	r.commits = append(r.commits, base)
	r.last = files
	return fmt.Sprintf("c%d", len(r.commits)), nil
}

func (r *movingRepo) Push(context.Context, string) error {
	r.pushes++
	if r.pushes > 1 {
		return nil
	}
	p := filepath.Join(r.dir, "apps.yaml")
	b, _ := os.ReadFile(p)
	_ = os.WriteFile(p, append([]byte("# someone else's change\n"), b...), 0o644)
	r.rev = "rev2"
	return fmt.Errorf("pushing: %w", gitrepo.ErrMoved)
}

func TestExecuteReappliesEditsWhenTheBranchMoved(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	repo := &movingRepo{dirRepo: e.repo.(*recRepo).dirRepo, rev: "rev1"}
	e.repo = repo
	res, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != "c2" || fmt.Sprint(repo.commits) != "[rev1 rev2]" {
		t.Fatalf("commit %s on bases %v; want c2 on [rev1 rev2]", res.Commit, repo.commits)
	}
	got := string(repo.last["apps.yaml"])
	if !strings.HasPrefix(got, "# someone else's change\n") || !strings.Contains(got, "image: reg/web:1.2 # pinned") {
		t.Errorf("the retried commit lost the other change or the edit:\n%s", got)
	}
}

func TestUnversionedManifestNeedsForce(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	floating := "kind: Deployment\nmetadata:\n  name: floating\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: reg/web\n"
	if err := os.WriteFile(filepath.Join(repo.dir, "floating.yaml"), []byte(floating), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("floating")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(p); len(got) != 1 || got[0].Action != "skip" || !strings.Contains(got[0].Reason, `runs "reg/web", which has no tag; use --force to pin it to reg/web:1.2`) {
		t.Errorf("unversioned without --force: %+v", got)
	}
	p, err = e.Plan(context.Background(), Spec{Services: []platform.ID{id("floating")}, Image: "reg/web:1.1", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(p); len(got) != 1 || got[0].Updates != "web:reg/web->reg/web:1.1" {
		t.Errorf("unversioned with --force: %+v", got)
	}
}

// A workload deleted from the cluster while its rollout is followed fails
// the release, naming it, instead of holding the job queue until the
// rollout timeout; and the commit carries the job's trailer.
func TestRolloutOfADeletedWorkloadFails(t *testing.T) {
	old := goneAfter
	goneAfter = 20 * time.Millisecond
	defer func() { goneAfter = old }()
	e, repo, cluster, _ := newTestEngine(t)
	cluster.workloads = nil // "web" is gone from the cluster
	_, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, AllLatest: true, User: "dana"}, history.Release,
		ExecOptions{RolloutTimeout: time.Minute, PollInterval: 5 * time.Millisecond, JobID: "j1"})
	if err == nil || !strings.Contains(err.Error(), "default:deployment/web is no longer in the cluster") {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasSuffix(repo.message, "\n"+JobTrailer("j1")+"\n") {
		t.Errorf("commit message lacks the job trailer:\n%s", repo.message)
	}
}

// An automated release's commit message and history rows name the images
// of the plan the job executed, not those the automator decided on: a
// policy changed in between (here the decision said 1.3, which the
// registry no longer offers; the job plans 1.2).
func TestAutomatedMessageFollowsTheExecutedPlan(t *testing.T) {
	e, repo, _, rec := newTestEngine(t)
	automate(t, repo.Dir(), id("web"), id("current"))
	spec := Spec{Services: []platform.ID{id("web"), id("current")}, AllLatest: true, User: "fluxd", Automated: true,
		Message: "automated release of default:deployment/web web=reg/web:1.3; default:deployment/current web=reg/web:1.3"}
	if _, err := e.Execute(context.Background(), "team-a", spec, history.AutomatedRelease, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	wantMsg := "Release reg/web:1.2 to team-a by fluxd\n\nautomated release of default:deployment/current web=reg/web:1.2; default:deployment/web web=reg/web:1.2\n\ndefault:deployment/current\n  web: reg/web:1.1 -> reg/web:1.2\n\ndefault:deployment/web\n  web: reg/web:1.0 -> reg/web:1.2\n"
	if diff := cmp.Diff(wantMsg, repo.message); diff != "" {
		t.Errorf("commit message (-want +got):\n%s", diff)
	}
	got := map[string]string{}
	for _, ev := range rec.events {
		got[strings.Join(ev.Services, ",")] = ev.Message
		for _, c := range ev.Changes {
			if !strings.Contains(ev.Message, c.Container+"="+c.To) {
				t.Errorf("history message %q does not name the change %s -> %s", ev.Message, c.From, c.To)
			}
		}
	}
	want := map[string]string{
		"default:deployment/current": "automated release of default:deployment/current web=reg/web:1.2",
		"default:deployment/web":     "automated release of default:deployment/web web=reg/web:1.2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history messages (-want +got):\n%s", diff)
	}
}

// automate writes fluxd.io/automated: "true" on the services in the
// test repository's apps.yaml, as 'fluxctl automate' does.
func automate(t *testing.T, dir string, ids ...platform.ID) {
	t.Helper()
	f := filepath.Join(dir, "apps.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if b, err = gitrepo.SetAnnotations(b, id, map[string]string{AnnotationAutomated: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// guardedCluster refuses to apply one workload, as platform/kube does one
// git may not apply (in fluxd's namespace, or running as its
// ServiceAccount).
type guardedCluster struct {
	*recCluster
	refuse platform.ID
}

func (c guardedCluster) MayApply(id platform.ID, _ []byte) error {
	if id == c.refuse {
		return errors.New("git may not apply objects in fluxd's own namespace")
	}
	return nil
}

// A release of a workload the cluster would refuse to apply fails before
// its commit: nothing is pushed half done.
func TestExecuteRefusedByTheClusterCommitsNothing(t *testing.T) {
	e, repo, cluster, _ := newTestEngine(t)
	e.cluster = guardedCluster{recCluster: cluster, refuse: id("web")}
	_, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web"), id("current")}, AllLatest: true, User: "dana"}, history.Release, ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "nothing was committed") || !strings.Contains(err.Error(), "fluxd's own namespace") {
		t.Fatalf("err = %v", err)
	}
	if repo.files != nil || len(cluster.applied) != 0 {
		t.Errorf("committed %v, applied %v", repo.files, cluster.applied)
	}
}

// imageCluster keeps the image each workload runs, whoever applied it
// last: a release, or the sync.
type imageCluster struct {
	recCluster
	mu     sync.Mutex
	images map[string]string // workload name → image
}

var imageRE = regexp.MustCompile(`image: (\S+)`)

func (c *imageCluster) Apply(_ context.Context, id platform.ID, m []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.images[id.Name] = imageRE.FindStringSubmatch(string(m))[1]
	return 1, nil
}

// slowApplier is the sync's applier, held inside Apply until released.
type slowApplier struct {
	c       *imageCluster
	started chan struct{}
	release chan struct{}
}

func (a *slowApplier) Apply(_ context.Context, objs []platform.Object, _ platform.SyncOptions) ([]platform.ObjectResult, error) {
	close(a.started)
	<-a.release
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	var out []platform.ObjectResult
	for _, o := range objs {
		spec := o.Manifest["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		a.c.images[o.Ref().Name] = spec["containers"].([]any)[0].(map[string]any)["image"].(string)
		out = append(out, platform.ObjectResult{Ref: o.Ref(), Action: platform.ActionChanged})
	}
	return out, nil
}

// TestReleaseDuringASlowSyncWins: a release that starts while a sync is
// applying what it read before the release pushed ends with the
// release's image running, and the release's push kicks a sync.
func TestReleaseDuringASlowSyncWins(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{"reg/web": {{Repository: "reg/web", Tag: "1.2", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/web", Tag: "1.0", CreatedAt: t0}}}
	cluster := &imageCluster{recCluster: recCluster{workloads: []platform.Workload{{ID: id("web")}}, applied: map[platform.ID]string{}}, images: map[string]string{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := NewEngine(&recRepo{dirRepo: dirRepo{dir}}, images, cluster, &recRecorder{}, log)
	applier := &slowApplier{c: cluster, started: make(chan struct{}), release: make(chan struct{})}
	s := syncer.New(syncer.Config{Interval: time.Hour}, e, applier, nil, log)
	var kicked []string
	var kmu sync.Mutex
	e.OnRevision(func(rev string) { kmu.Lock(); kicked = append(kicked, rev); kmu.Unlock(); s.Kick(rev) })

	synced := make(chan error, 1)
	go func() { _, err := s.Sync(context.Background(), false, false); synced <- err }()
	<-applier.started // the sync read reg/web:1.0 and is applying it

	released := make(chan error, 1)
	go func() {
		_, err := e.Execute(context.Background(), "default", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{})
		released <- err
	}()
	// Give a release that does not wait for the sync the time to finish
	// first (what the test guards against); one that waits finishes after.
	select {
	case err := <-released:
		released <- err
	case <-time.After(time.Second):
	}
	close(applier.release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	cluster.mu.Lock()
	got := cluster.images["web"]
	cluster.mu.Unlock()
	if got != "reg/web:1.2" {
		t.Errorf("web runs %s after the release, want reg/web:1.2 (the sync applied what it read before the push over the release)", got)
	}
	kmu.Lock()
	defer kmu.Unlock()
	if len(kicked) == 0 || kicked[len(kicked)-1] != "c0ffee" {
		t.Errorf("revisions told = %v, want the release's push c0ffee last (kicking a sync)", kicked)
	}
}
