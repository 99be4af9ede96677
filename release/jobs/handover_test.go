package jobs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/pgserver"
)

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
		testSteppingDown(t, open(), open())
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
		testSteppingDown(t, open(), open())
	})
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
