package release

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
}

func (g *gateExec) Execute(ctx context.Context, _ string, spec Spec, _ history.Type, o ExecOptions) (*Result, error) {
	g.started <- spec.Message
	o.Report(Progress{Stage: StageEditing})
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.mu.Lock()
	g.order = append(g.order, spec.Message)
	g.mu.Unlock()
	return &Result{Plan: &Plan{}, Commit: "commit-" + spec.Message}, nil
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

	a, _ := q.Enqueue(ctx, "team", Spec{Message: "a"}, "")
	if got := <-g.started; got != "a" {
		t.Fatalf("started %s first", got)
	}
	b, _ := q.Enqueue(ctx, "team", Spec{Message: "b"}, "")
	c, _ := q.Enqueue(ctx, "team", Spec{Message: "c"}, "")
	d, _ := q.Enqueue(ctx, "team", Spec{Message: "d"}, "")
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
	if len(stages) < 3 || stages[0] != StageQueued || stages[len(stages)-1] != StageFailed {
		t.Errorf("watched stages %v; want queued ... failed", stages)
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

func TestQueueRecoverAfterRestart(t *testing.T) {
	q, g, store := newQueue(t)
	ctx := context.Background()
	now := time.Now()
	for _, j := range []history.Job{
		{ID: "running", Instance: "team", State: history.JobRunning, Stage: StagePushing, Spec: []byte(`{"Message":"r"}`), CreatedAt: now},
		{ID: "queued", Instance: "team", State: history.JobQueued, Stage: StageQueued, Spec: []byte(`{"Message":"q"}`), CreatedAt: now},
	} {
		if _, err := store.SaveJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	u, _ := q.Get(ctx, "team", "running")
	if u.Job.State != history.JobFailed || u.Job.Error == "" {
		t.Errorf("a job running at the restart: %+v", u.Job)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go q.Run(rctx)
	if got := <-g.started; got != "q" {
		t.Fatalf("started %q after the restart; want the queued job", got)
	}
	g.release <- struct{}{}
	waitState(t, q, "team", "queued", history.JobSucceeded)
}
