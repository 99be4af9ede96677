package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/fluxerr"
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
