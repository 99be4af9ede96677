package jobs

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/release"
)

// Two clusters' fluxds share one store (--cluster-name a and b): each
// runs its own jobs, and neither takes in the other's, neither a queued
// job (adopt) nor a live one at its start (Recover).
func TestClustersOnOneStoreRunOnlyTheirJobs(t *testing.T) {
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
		testClusters(t, open(), open())
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
		testClusters(t, open(), open())
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
