package release

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// countRepo counts commits and pushes; its pushes may fail.
type countRepo struct {
	dirRepo
	mu       sync.Mutex
	commits  []string // messages
	pushes   int
	head     string
	pushErr  error // returned by Push (the commit lands anyway if landErr)
	lands    bool  // a failing push still reached the remote
	findsJob string
}

func (r *countRepo) Sync(context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.head, nil
}

func (r *countRepo) Commit(_ context.Context, _ string, files map[string][]byte, msg string, _ gitrepo.Signature) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for f, b := range files { // as a clone's working tree has it
		if err := os.WriteFile(filepath.Join(r.dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	r.commits = append(r.commits, msg)
	return "commit" + string(rune('0'+len(r.commits))), nil
}

func (r *countRepo) Push(_ context.Context, c string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pushes++
	if r.pushErr != nil {
		if r.lands {
			r.head = c
		}
		return r.pushErr
	}
	r.head = c
	return nil
}

func (r *countRepo) FindCommit(context.Context, string, int) (string, error) { return r.findsJob, nil }

// stuckCluster has the workloads, which never finish rolling out.
type stuckCluster struct{ recCluster }

func (c *stuckCluster) Workloads(context.Context) ([]platform.Workload, error) {
	return []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "updating"}}, nil
}

func stuckEngine(t *testing.T) (*Engine, *countRepo, *recRecorder) {
	t.Helper()
	e, rr, _, rec := newTestEngine(t)
	repo := &countRepo{dirRepo: rr.dirRepo, head: "rev"}
	e.repo = repo
	e.cluster = &stuckCluster{recCluster{applied: map[platform.ID]string{}}}
	return e, repo, rec
}

// A fluxd that stops (SIGTERM) while a release rolls out leaves it pushed
// and applied: no revert commit, no history row, ErrInterrupted, even with
// rollback on failure asked for.
func TestStopDuringRolloutIsNotACancel(t *testing.T) {
	e, repo, rec := stuckEngine(t)
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, stop)
	_, err := e.Execute(ctx, "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release,
		ExecOptions{RolloutTimeout: time.Minute, PollInterval: 5 * time.Millisecond, RollbackOnFailure: true, JobID: "j1"})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v; want ErrInterrupted", err)
	}
	if len(repo.commits) != 1 || repo.pushes != 1 {
		t.Errorf("commits %d, pushes %d; want the release's only (no revert): %q", len(repo.commits), repo.pushes, repo.commits)
	}
	if len(rec.events) != 0 {
		t.Errorf("history = %+v; want nothing recorded for an interrupted job", rec.events)
	}
}

// A user's cancel during the rollout still rolls back, as documented.
func TestUserCancelDuringRolloutRollsBack(t *testing.T) {
	e, repo, rec := stuckEngine(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancel(ErrCancelled) })
	_, err := e.Execute(ctx, "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release,
		ExecOptions{RolloutTimeout: 300 * time.Millisecond, PollInterval: 5 * time.Millisecond, JobID: "j1"})
	if err == nil || errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "rolled back") && !strings.Contains(err.Error(), "rollback") {
		t.Fatalf("err = %v; want a cancel that rolls back", err)
	}
	if len(repo.commits) != 2 || !strings.HasPrefix(repo.commits[1], "Revert release") {
		t.Errorf("commits = %q; want the release and its revert", repo.commits)
	}
	var types []string
	for _, ev := range rec.events {
		types = append(types, string(ev.Type))
	}
	if got := strings.Join(types, " "); got != "rollback cancelled" {
		t.Errorf("history types = %q; want the rollback and the cancelled release", got)
	}
}

// A push that reports an error after the remote took it (a timeout on the
// response) is a push: the release is applied and recorded, not "nothing
// pushed".
func TestAmbiguousPushThatLanded(t *testing.T) {
	e, repo, rec := stuckEngine(t)
	e.cluster = &recCluster{workloads: []platform.Workload{{ID: id("web")}}, applied: map[platform.ID]string{}}
	repo.pushErr, repo.lands = errors.New("pushing: i/o timeout"), true
	res, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatalf("err = %v; want the landed push carried on", err)
	}
	if res.Commit != "commit1" || len(rec.events) != 1 || rec.events[0].Type != history.Release {
		t.Errorf("commit %q, history %+v", res.Commit, rec.events)
	}
	if len(e.cluster.(*recCluster).applied) != 1 {
		t.Errorf("applied = %v; want web", e.cluster.(*recCluster).applied)
	}
}

// The same error when the remote does not have the commit stays a failed
// release with nothing applied.
func TestAmbiguousPushThatDidNotLand(t *testing.T) {
	old := landedRecheck
	landedRecheck = 10 * time.Millisecond
	defer func() { landedRecheck = old }()
	e, repo, rec := stuckEngine(t)
	cl := &recCluster{applied: map[platform.ID]string{}}
	e.cluster = cl
	repo.pushErr = errors.New("pushing: i/o timeout")
	_, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{JobID: "j1"})
	if err == nil || !strings.Contains(err.Error(), "i/o timeout") {
		t.Fatalf("err = %v", err)
	}
	if len(cl.applied) != 0 || len(rec.events) != 1 || rec.events[0].Type != history.Failed || rec.events[0].Commit != "" {
		t.Errorf("applied %v, history %+v; want nothing applied and a failure without commit", cl.applied, rec.events)
	}
}

// A confirmed plan stays valid when git moves for another service (another
// job's commit, an automated release), and is refused, naming the change,
// when its own service changed.
func TestChecksumHoldsForOwnServicesOnly(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}
	p1, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	// Another service changes in git: a different revision, the same plan.
	dir := e.repo.Dir()
	e.repo = movedRepo{dirRepo{dir}, "rev2"}
	edit(t, dir, "image: reg/web:1.1\n        - name: db", "image: reg/web:1.2\n        - name: db")
	p2, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Checksum != p2.Checksum {
		t.Errorf("checksum changed for a commit to another service: %s", e.WhatChanged(p1.Checksum, p2))
	}
	// A comment on its own manifest is no change; another field is.
	edit(t, dir, "  name: web\nspec:\n", "  name: web # the web tier\nspec:\n")
	if p, _ := e.Plan(context.Background(), spec); p.Checksum != p1.Checksum {
		t.Errorf("checksum changed for a comment: %s", e.WhatChanged(p1.Checksum, p))
	}
	edit(t, dir, "  name: web # the web tier\nspec:\n", "  name: web\nspec:\n  replicas: 3\n")
	p4, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.WhatChanged(p1.Checksum, p4); p4.Checksum == p1.Checksum || !strings.Contains(got, "default:deployment/web's manifest changed in git") {
		t.Errorf("an edit of the released workload's manifest: checksum %v, WhatChanged %q", p4.Checksum == p1.Checksum, got)
	}
	edit(t, dir, "  name: web\nspec:\n  replicas: 3\n", "  name: web\nspec:\n")
	// Its own service's image changes: refused, saying what changed.
	edit(t, dir, "image: reg/web:1.0 # pinned", "image: reg/web:1.1 # pinned")
	p3, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Checksum == p1.Checksum {
		t.Fatal("checksum unchanged when the targeted service's image changed in git")
	}
	if got := e.WhatChanged(p1.Checksum, p3); !strings.Contains(got, "default:deployment/web would now") {
		t.Errorf("WhatChanged = %q", got)
	}
}

type movedRepo struct {
	dirRepo
	rev string
}

func (r movedRepo) Sync(context.Context) (string, error) { return r.rev, nil }

// edit replaces old with new in the test repository's apps.yaml.
func edit(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, "apps.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("apps.yaml lacks %q", old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readyCluster's workloads have rolled out whatever is applied.
type readyCluster struct{ recCluster }

func (c *readyCluster) Workloads(context.Context) ([]platform.Workload, error) {
	return []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "ready"}}, nil
}

// A stop while a failed release is being rolled back leaves the job at
// "rolling back" with nothing more recorded; the next fluxd finishes the
// rollback (its revert already pushed: no second one) and records the
// release failed, never succeeded.
func TestStopDuringRollbackIsFinishedByTheNextFluxd(t *testing.T) {
	e, repo, rec := stuckEngine(t)
	root, stop := context.WithCancel(context.Background())
	job, cancelJob := context.WithCancelCause(root)
	defer cancelJob(nil)
	ctx := WithRoot(job, root)
	var stages []string
	var mu sync.Mutex
	report := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
		if p.Stage == StageRollingBack && len(repo.commits) == 2 {
			time.AfterFunc(50*time.Millisecond, stop) // while the revert rolls out
		}
	}
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}
	o := ExecOptions{RolloutTimeout: 200 * time.Millisecond, PollInterval: 5 * time.Millisecond, RollbackOnFailure: true, JobID: "j1", Report: report}
	res, err := e.Execute(ctx, "team-a", spec, history.Release, o)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v (result %+v); want ErrInterrupted", err, res)
	}
	if len(repo.commits) != 2 {
		t.Fatalf("commits = %q; want the release and its revert", repo.commits)
	}
	if got := historyOf(rec); got != "rollback" {
		t.Errorf("history = %q; want only the rollback (the job is not over)", got)
	}
	// The next fluxd: the cluster now rolls out what it is given.
	e.cluster = &readyCluster{recCluster{applied: map[platform.ID]string{}}}
	plan := &Plan{Items: []Item{{Service: id("web"), Action: Update, File: "apps.yaml", Updates: []ContainerUpdate{{Container: "web", Current: "reg/web:1.0", Target: "reg/web:1.2"}}}}}
	o.Report, o.RollingBack = nil, true
	_, err = e.Resume(context.Background(), "team-a", spec, plan, "commit1", history.Release, o)
	if err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("resumed rollback: %v; want the release failed and rolled back", err)
	}
	if len(repo.commits) != 2 {
		t.Errorf("commits = %q; the take-over must not revert twice", repo.commits)
	}
	if got := historyOf(rec); got != "rollback failed" {
		t.Errorf("history = %q; want the rollback, then the release failed", got)
	}
}

func historyOf(rec *recRecorder) string {
	var types []string
	for _, ev := range rec.events {
		types = append(types, string(ev.Type))
	}
	return strings.Join(types, " ")
}

// lateRepo's remote applies a push its client gave up on a moment later:
// the first look after the error does not see it, the second does.
type lateRepo struct {
	countRepo
	syncs int
}

func (r *lateRepo) Sync(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs++
	if r.syncs == 3 && len(r.commits) > 0 { // plan, first look, second look
		r.head = "commit1"
	}
	return r.head, nil
}

func TestAPushThatLandsLateIsSeen(t *testing.T) {
	old := landedRecheck
	landedRecheck = 10 * time.Millisecond
	defer func() { landedRecheck = old }()
	e, rr, _, rec := newTestEngine(t)
	repo := &lateRepo{countRepo: countRepo{dirRepo: rr.dirRepo, head: "rev", pushErr: errors.New("pushing: i/o timeout")}}
	e.repo = repo
	res, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{JobID: "j1"})
	if err != nil || res.Commit != "commit1" {
		t.Fatalf("a push that landed a moment after its timeout: %v, %+v", err, res)
	}
	if len(rec.events) != 1 || rec.events[0].Type != history.Release {
		t.Errorf("history = %+v", rec.events)
	}
}
