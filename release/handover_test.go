package release

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
)

// A release accepted by a leader that is stepping down, and stored only
// after the new leader's take-over read the store, is run by the new
// leader. Two queues share one real SQLite file, as two replicas on one
// host share it.
func TestJobAcceptedWhileSteppingDownRunsOnTheNewLeader(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	oldExec := &gateExec{started: make(chan string, 10), release: make(chan struct{})}
	newExec := &gateExec{started: make(chan string, 10), release: make(chan struct{})}
	old := NewQueue(oldExec, store, 0, false, discard)
	next := NewQueue(newExec, store, 0, false, discard)
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
	u, err := old.Enqueue(ctx, "team", Spec{Message: "late"}, "")
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
