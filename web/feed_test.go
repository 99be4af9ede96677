package web

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fluxd/fluxd/history/sqlite"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// TestHubsShareTheStoresStream: two replicas' hubs on one store (a real
// SQLite file): what the leader's hub publishes reaches the follower's
// rings, in order, for the right instance; an event for everyone reaches
// every instance's ring.
func TestHubsShareTheStoresStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *sqlite.Store {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	leader, follower := NewHub(0).UseStore(open()), NewHub(0).UseStore(open())
	for _, h := range []*Hub{leader, follower} {
		go h.Run(ctx, nil, 20*time.Millisecond, nil)
	}
	// Each reader starts at the newest event: wait until both have read
	// the (empty) store's head, then publish.
	time.Sleep(200 * time.Millisecond)
	_, _, wake := follower.since("team", 0)
	follower.last("other") // the instance's ring exists: it gets "" events
	leader.PublishJob("team", &fluxdv1.WatchJobResponse{Job: &fluxdv1.Job{Id: "job-1", State: fluxdv1.JobState_JOB_STATE_RUNNING, Stage: "rolling out"}})
	leader.Publish("", "automation", &emptypb.Empty{})
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's hub was not woken by the leader's event")
	}
	evs := waitEvents(follower, "team", 2)
	if len(evs) != 2 || evs[0].Type != "job" || evs[1].Type != "automation" {
		t.Fatalf("the follower's team ring: %v", evs)
	}
	if other, _, _ := follower.since("other", 0); len(other) != 1 || other[0].Type != "automation" {
		t.Errorf("the follower's other ring: %v; want only the event for everyone", other)
	}
	// The leader's own pages see it too, through the store.
	if mine := waitEvents(leader, "team", 2); len(mine) != 2 {
		t.Errorf("the leader's team ring: %v", mine)
	}
}

// waitEvents waits (10 s at most) until h's ring of instance holds n
// events, and returns them.
func waitEvents(h *Hub, instance string, n int) []Event {
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _, _ := h.since(instance, 0)
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}
