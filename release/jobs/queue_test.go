package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// gateExec runs jobs only when released, recording the order.
type gateExec struct {
	mu      sync.Mutex
	order   []string
	started chan string
	release chan struct{}
	pushed  map[string]string // job ID → commit with its trailer
	// checksums records the checksum each job ran with, by message.
	checksums map[string]string
}

func (g *gateExec) Execute(ctx context.Context, _ string, spec release.Spec, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	g.started <- spec.Message
	o.Report(release.Progress{Stage: release.StageEditing})
	select {
	case <-g.release:
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), release.ErrCancelled) {
			return nil, release.ErrInterrupted // fluxd stops, as the Engine tells it
		}
		return nil, ctx.Err()
	}
	g.mu.Lock()
	g.order = append(g.order, spec.Message)
	if g.checksums == nil {
		g.checksums = map[string]string{}
	}
	g.checksums[spec.Message] = o.Checksum
	g.mu.Unlock()
	return &release.Result{Plan: &release.Plan{}, Commit: "commit-" + spec.Message}, nil
}

// Resume records a take-over as "resume:<commit>".
func (g *gateExec) Resume(ctx context.Context, instance string, spec release.Spec, plan *release.Plan, commit string, typ history.Type, o release.ExecOptions) (*release.Result, error) {
	spec.Message = "resume:" + commit
	return g.Execute(ctx, instance, spec, typ, o)
}

// FindJobCommit finds the commits listed in pushed.
func (g *gateExec) FindJobCommit(_ context.Context, id string) (string, error) {
	return g.pushed[id], nil
}

func newQueue(t *testing.T) (*Queue, *gateExec, *sqlite.Store) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g := &gateExec{started: make(chan string, 10), release: make(chan struct{})}
	return NewQueue(g, store, 0, false, slog.New(slog.NewTextHandler(io.Discard, nil))), g, store
}

func waitState(t *testing.T, q *Queue, instance, id string, want history.JobState) JobUpdate {
	t.Helper()
	for i := 0; i < 200; i++ {
		u, err := q.Get(context.Background(), instance, id)
		if err == nil && u.Job.State == want {
			return u
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("job %s never reached %s", id, want)
	return JobUpdate{}
}

func TestQueueRunsInOrderAndCancels(t *testing.T) {
	q, g, store := newQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)

	a, _ := q.Enqueue(ctx, "team", release.Spec{Message: "a"}, "")
	if got := <-g.started; got != "a" {
		t.Fatalf("started %s first", got)
	}
	b, _ := q.Enqueue(ctx, "team", release.Spec{Message: "b"}, "")
	c, _ := q.Enqueue(ctx, "team", release.Spec{Message: "c"}, "")
	d, _ := q.Enqueue(ctx, "team", release.Spec{Message: "d"}, "")
	if b.Position != 1 || c.Position != 2 || d.Position != 3 {
		t.Errorf("positions %d %d %d, want 1 2 3", b.Position, c.Position, d.Position)
	}
	// Another instance cannot see or cancel the job.
	if _, err := q.Cancel(ctx, "other", c.Job.ID); fluxerr.KindOf(err) != fluxerr.Missing {
		t.Errorf("cancel from another instance: %v", err)
	}
	// Cancel a queued job: it never runs.
	if u, err := q.Cancel(ctx, "team", c.Job.ID); err != nil || u.Job.State != history.JobCancelled {
		t.Fatalf("cancel queued: %v, %v", u, err)
	}
	watch, err := q.Watch(ctx, "team", d.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	g.release <- struct{}{} // a ends
	if got := <-g.started; got != "b" {
		t.Fatalf("after a, %s started; want b", got)
	}
	g.release <- struct{}{} // b ends
	if got := <-g.started; got != "d" {
		t.Fatalf("after b, %s started; want d (c was cancelled)", got)
	}
	// Cancel the running job before it pushes.
	if _, err := q.Cancel(ctx, "team", d.Job.ID); err != nil {
		t.Fatal(err)
	}
	final := waitState(t, q, "team", d.Job.ID, history.JobCancelled)
	if final.Job.Commit != "" {
		t.Errorf("a cancelled job has commit %q", final.Job.Commit)
	}
	var stages []string
	for u := range watch {
		if n := len(stages); n == 0 || stages[n-1] != u.Job.Stage {
			stages = append(stages, u.Job.Stage)
		}
	}
	if len(stages) < 3 || stages[0] != release.StageQueued || stages[len(stages)-1] != release.StageCancelled {
		t.Errorf("watched stages %v; want queued ... cancelled", stages)
	}
	if u := waitState(t, q, "team", a.Job.ID, history.JobSucceeded); u.Job.Commit != "commit-a" {
		t.Errorf("job a: %+v", u.Job)
	}
	if g.order[0] != "a" || g.order[1] != "b" || len(g.order) != 2 {
		t.Errorf("executed %v, want [a b]", g.order)
	}
	jobs, _ := q.List(ctx, "team", 10)
	if len(jobs) != 4 || jobs[0].Job.ID != d.Job.ID {
		t.Errorf("List: %d jobs, newest first %v", len(jobs), jobs)
	}
	evs, _ := store.Events(ctx, "team", history.Query{})
	if len(evs) != 1 || evs[0].Type != history.Cancelled {
		t.Errorf("history = %+v; want the queued cancel recorded", evs)
	}
}

func TestQueueRecoverTakesOverLiveJobs(t *testing.T) {
	q, g, store := newQueue(t)
	ctx := context.Background()
	now := time.Now()
	plan := []byte(`{"Items":[{"Service":{"Namespace":"default","Kind":"deployment","Name":"app"},"Action":"update"}]}`)
	g.pushed = map[string]string{"pushed-unsaved": "c2"}
	for _, j := range []history.Job{
		// Pushed, commit saved: taken over.
		{ID: "pushed", Instance: "team", State: history.JobRunning, Stage: release.StageRollingOut, Spec: []byte(`{"Message":"p"}`), Plan: plan, Commit: "c1", CreatedAt: now},
		// Not pushed: runs again.
		{ID: "unpushed", Instance: "team", State: history.JobRunning, Stage: release.StageEditing, Spec: []byte(`{"Message":"u"}`), CreatedAt: now},
		// Pushed, but the commit was not saved before the kill: found by
		// its trailer, taken over.
		{ID: "pushed-unsaved", Instance: "team", State: history.JobRunning, Stage: release.StagePushing, Spec: []byte(`{"Message":"x"}`), Plan: plan, CreatedAt: now},
		// Pushed with no plan saved: cannot be taken over; failed.
		{ID: "planless", Instance: "team", State: history.JobRunning, Stage: release.StageApplying, Spec: []byte(`{"Message":"y"}`), Commit: "c3", CreatedAt: now},
		{ID: "queued", Instance: "team", State: history.JobQueued, Stage: release.StageQueued, Spec: []byte(`{"Message":"q"}`), Checksum: "confirmed", CreatedAt: now},
	} {
		if _, err := store.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	u, _ := q.Get(ctx, "team", "planless")
	if u.Job.State != history.JobFailed || !strings.Contains(u.Job.Error, "plan was not saved") {
		t.Errorf("a pushed job without its plan: %+v", u.Job)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go q.Run(rctx)
	var order []string
	for range 4 {
		order = append(order, <-g.started)
		g.release <- struct{}{}
	}
	if got := strings.Join(order, " "); got != "resume:c1 u resume:c2 q" {
		t.Errorf("after the restart ran %q; want the live jobs first, in order, pushed ones taken over", got)
	}
	for _, id := range []string{"pushed", "unpushed", "pushed-unsaved", "queued"} {
		waitState(t, q, "team", id, history.JobSucceeded)
	}
	evs, _ := store.Events(ctx, "team", history.Query{})
	if len(evs) != 1 || evs[0].Type != history.Failed {
		t.Errorf("history = %+v; want only the job that could not be carried on, failed", evs)
	}
	g.mu.Lock()
	if g.checksums["q"] != "confirmed" {
		t.Errorf("the queued job ran with checksum %q after the restart; want the one it was confirmed with", g.checksums["q"])
	}
	g.mu.Unlock()
}

// A queue whose fluxd stops leaves the running job live in the store (not
// failed, not cancelled), and the next queue on that store carries it on.
func TestQueueStopLeavesTheRunningJobLive(t *testing.T) {
	q, g, store := newQueue(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	u, err := q.Enqueue(context.Background(), "team", release.Spec{Message: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	stop()
	<-done
	j, err := store.Job(context.Background(), "team", u.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != history.JobRunning {
		t.Fatalf("after a stop the job is %s (%s); want it left running for a take-over", j.State, j.Error)
	}
	if evs, _ := store.Events(context.Background(), "team", history.Query{}); len(evs) != 0 {
		t.Errorf("history = %+v; want nothing recorded for a stop", evs)
	}
	q2 := NewQueue(g, store, 0, false, q.log)
	if err := q2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q2.Run(rctx)
	if got := <-g.started; got != "a" {
		t.Errorf("the next fluxd ran %q; want the interrupted job again", got)
	}
	g.release <- struct{}{}
	waitState(t, q2, "team", u.Job.ID, history.JobSucceeded)
}

// Two clusters' fluxds share one store (--cluster-name a and b): each
// runs its own jobs, and neither takes in the other's, neither a queued
// job (adopt) nor a live one at its start (Recover).
func TestClustersOnOneStoreRunOnlyTheirJobs(t *testing.T) {
	onOneStore(t, testClusters)
}

// onOneStore runs test with two connections to one real store: a
// PostgreSQL database, as replicas share one, and a SQLite file, as
// replicas on one host may.
func onOneStore(t *testing.T, test func(t *testing.T, a, b replicaStore)) {
	t.Run("postgres", func(t *testing.T) {
		url, srv := pgserver.Database(t)
		open := func() replicaStore {
			s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Password: srv.Password})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		test(t, open(), open())
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.db")
		open := func() replicaStore {
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		test(t, open(), open())
	})
}

func testClusters(t *testing.T, storeA, storeB replicaStore) {
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	execA := &gateExec{started: make(chan string, 10), release: make(chan struct{}, 10)}
	execB := &gateExec{started: make(chan string, 10), release: make(chan struct{}, 10)}
	a := NewQueue(execA, storeA, 0, false, discard)
	b := NewQueue(execB, storeB, 0, false, discard)
	a.SetCluster("a")
	b.SetCluster("b")
	b.adoptEvery = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A's fluxd accepts a job while its queue is not running yet (it
	// is starting, or its leader is changing): the job waits in the store.
	u, err := a.Enqueue(ctx, "default", release.Spec{Message: "for-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ClusterOf(u.Job.ID) != "a" || !strings.HasPrefix(u.Job.ID, "a.") {
		t.Fatalf("A's job is %q, want an ID naming cluster a", u.Job.ID)
	}
	// B's fluxd starts, and looks for jobs to take in, many times.
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	go b.Run(ctx)
	select {
	case got := <-execB.started:
		t.Fatalf("cluster B's fluxd ran %q, a job of cluster A", got)
	case <-time.After(300 * time.Millisecond):
	}
	// Asked of B, A's job is not cancelled: B says whose it is.
	if _, err := b.Cancel(ctx, "default", u.Job.ID); err == nil || !strings.Contains(err.Error(), `another cluster's fluxd (--cluster-name "a")`) {
		t.Fatalf("cancelling A's job through B: %v, want an error naming cluster a", err)
	}
	// B runs its own.
	if _, err := b.Enqueue(ctx, "default", release.Spec{Message: "for-b"}, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-execB.started:
		if got != "for-b" {
			t.Fatalf("B ran %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B never ran its own job")
	}
	execB.release <- struct{}{}
	// A starts and runs the job it accepted.
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	select {
	case got := <-execA.started:
		if got != "for-a" {
			t.Fatalf("A ran %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A never ran the job it accepted")
	}
	execA.release <- struct{}{}
	var j history.Job
	for range 500 {
		if j, err = storeA.Job(ctx, "default", u.Job.ID); err == nil && j.State == history.JobSucceeded {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if j.State != history.JobSucceeded {
		t.Fatalf("A's job is stored %s (%v), want succeeded", j.State, err)
	}
	select {
	case got := <-execB.started:
		t.Fatalf("B ran %q too", got)
	default:
	}
}

func TestClusterOf(t *testing.T) {
	for id, want := range map[string]string{"0123abcd": "", "a.0123": "a", "eu.west.0123": "eu.west"} {
		if got := ClusterOf(id); got != want {
			t.Errorf("ClusterOf(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

// replicaStore is one replica's connection to the history store the
// replicas share.
type replicaStore interface {
	JobStore
	Job(ctx context.Context, instance, id string) (history.Job, error)
}

// A release accepted by a leader that is stepping down, and stored only
// after the new leader's take-over read the store, is run by the new
// leader. Two queues, each with its own connection, share one real
// store: a PostgreSQL database, as replicas do, and a SQLite file, as
// replicas on one host may.
func TestJobAcceptedWhileSteppingDownRunsOnTheNewLeader(t *testing.T) {
	onOneStore(t, testSteppingDown)
}

func testSteppingDown(t *testing.T, oldStore, newStore replicaStore) {
	store := newStore
	var err error
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	oldExec := &gateExec{started: make(chan string, 10), release: make(chan struct{})}
	newExec := &gateExec{started: make(chan string, 10), release: make(chan struct{})}
	old := NewQueue(oldExec, oldStore, 0, false, discard)
	next := NewQueue(newExec, newStore, 0, false, discard)
	next.adoptEvery = 20 * time.Millisecond

	// The old leader leads, then steps down.
	oldCtx, stepDown := context.WithCancel(context.Background())
	oldDone := make(chan struct{})
	go func() { old.Run(oldCtx); close(oldDone) }()
	stepDown()
	<-oldDone

	// The new leader takes over: the store holds nothing live yet.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := next.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	go next.Run(ctx)

	// The call the old leader accepted a moment before it stepped down
	// is stored now.
	u, err := old.Enqueue(ctx, "team", release.Spec{Message: "late"}, "")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-newExec.started:
		if got != "late" {
			t.Fatalf("the new leader ran %q", got)
		}
	case got := <-oldExec.started:
		t.Fatalf("the replica that stepped down ran %q", got)
	case <-time.After(10 * time.Second):
		j, _ := store.Job(ctx, "team", u.Job.ID)
		t.Fatalf("no replica ran the job; it is stored %s", j.State)
	}
	newExec.release <- struct{}{}
	var j history.Job
	for i := 0; i < 500; i++ {
		if j, err = store.Job(ctx, "team", u.Job.ID); err == nil && j.State == history.JobSucceeded {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("stored job is %s (%v); want succeeded", j.State, err)
}

// resumeExec hands over the options of every take-over it is asked for.
type resumeExec struct {
	gateExec
	resumed chan release.ExecOptions
}

func (r *resumeExec) Resume(_ context.Context, _ string, _ release.Spec, plan *release.Plan, commit string, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	r.resumed <- o
	return &release.Result{Plan: plan, Commit: commit}, nil
}

// A job taken over while it rolled out is resumed with the time its
// rollout began, as its log in a real SQLite store says, and its own
// rollout timeout: the engine's deadline runs from then
// (release.TestTakenOverRolloutKeepsItsDeadline), not again from the
// take-over.
func TestRecoverPassesTheRolloutStart(t *testing.T) {
	_, _, store := newQueue(t)
	ctx := context.Background()
	spec := release.Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana", RolloutTimeout: 30 * time.Minute}
	plan := &release.Plan{Items: []release.Item{{Service: id("web"), Action: release.Update, Updates: []release.ContainerUpdate{{Container: "web", Current: "reg/web:1.0", Target: "reg/web:1.2"}}}}}
	began := time.Now().Add(-40 * time.Minute).Truncate(time.Second)
	specJSON, _ := json.Marshal(spec)
	planJSON, _ := json.Marshal(plan)
	if _, err := store.SaveJob(ctx, history.Job{ID: "j1", Instance: "team", State: history.JobRunning, Stage: release.StageRollingOut, Spec: specJSON, Plan: planJSON,
		Commit: "c0ffee", CreatedAt: began.Add(-time.Minute), StartedAt: began.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for i, l := range []history.JobLogLine{{Stage: release.StagePushing, Text: "pushing the commit", Time: began.Add(-time.Second)}, {Stage: release.StageRollingOut, Text: "following the rollout", Time: began}} {
		l.JobID, l.Instance, l.Seq = "j1", "team", int64(i+1)
		if err := store.AppendJobLog(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	exec := &resumeExec{resumed: make(chan release.ExecOptions, 1)}
	q := NewQueue(exec, store, 0, false, slog.New(slog.DiscardHandler))
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go q.Run(rctx)
	var o release.ExecOptions
	select {
	case o = <-exec.resumed:
	case <-time.After(20 * time.Second):
		t.Fatal("the live job was not taken over")
	}
	if !o.RolloutStarted.Equal(began) || o.RolloutTimeout != 30*time.Minute || o.JobID != "j1" || !o.Started.Equal(began.Add(-time.Minute)) {
		t.Errorf("taken over with rollout started %v, timeout %v, job %q, started %v; want %v, 30m, j1, %v",
			o.RolloutStarted, o.RolloutTimeout, o.JobID, o.Started, began, began.Add(-time.Minute))
	}
	waitState(t, q, "team", "j1", history.JobSucceeded)
}

// chattyExec reports many rollout updates, then succeeds.
type chattyExec struct{ gateExec }

func (c *chattyExec) Execute(ctx context.Context, _ string, spec release.Spec, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	for i := 0; i < 300; i++ {
		o.Report(release.Progress{Stage: release.StageRollingOut, Commit: "c1", Workloads: []release.WorkloadProgress{{Service: id("web"), Replicas: replicas(int32(i))}}})
	}
	return &release.Result{Plan: &release.Plan{}, Commit: "c1"}, nil
}

func replicas(n int32) platform.Replicas { return platform.Replicas{Desired: 300, Updated: n} }

// A watcher that reads nothing while its job runs (a slow fluxctl, a
// congested stream) still gets the job's final state last: fluxctl
// release decides its exit code from it.
func TestSlowWatcherGetsTheFinalUpdate(t *testing.T) {
	q, _, _ := newQueue(t)
	q.exec = &chattyExec{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := q.Enqueue(ctx, "team", release.Spec{Message: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := q.Watch(ctx, "team", u.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	go q.Run(ctx)
	waitState(t, q, "team", u.Job.ID, history.JobSucceeded)
	var last JobUpdate
	n := 0
	for u := range ch {
		last, n = u, n+1
	}
	if last.Job.State != history.JobSucceeded {
		t.Fatalf("the watcher's last of %d updates is %s at stage %q; want the job's end, succeeded", n, last.Job.State, last.Job.Stage)
	}
}

func id(name string) platform.ID {
	return platform.ID{Namespace: "default", Kind: "deployment", Name: name}
}

// A watcher that learns of a job's end finds it counted in Ended (the
// daemon's view of services is rebuilt for it, so the cluster as the job
// left it shows in the next list-services).
func TestJobEndCountedBeforeItIsPublished(t *testing.T) {
	q, _, _ := newQueue(t)
	q.exec = &chattyExec{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := q.Enqueue(ctx, "team", release.Spec{Message: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := q.Watch(ctx, "team", u.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	go q.Run(ctx)
	for u := range ch {
		if u.Job.State == history.JobSucceeded && q.Ended() != 1 {
			t.Fatalf("the job's end was published with Ended() = %d; want 1", q.Ended())
		}
	}
	if q.Ended() != 1 {
		t.Errorf("Ended() = %d after one job; want 1", q.Ended())
	}
}
