package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
)

// testOutboxWithRecord: every recorded event has its notice, in the order
// of the events, naming the event's row; a notice without a row (a
// release that began rolling out) comes after them.
func testOutboxWithRecord(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	if last, err := s.LastNotice(ctx); err != nil || last != 0 {
		t.Fatalf("LastNotice on an empty store = %d, %v; want 0", last, err)
	}
	at := time.Unix(1700000000, 0)
	rel := history.Event{Instance: "team", Type: history.Release, User: "ann", Services: []string{"default:deployment/web"},
		Changes: []history.Change{{Service: "default:deployment/web", Container: "app", From: "reg/app:1", To: "reg/app:2"}},
		Commit:  "abc123", Job: "job-1", StartedAt: at, EndedAt: at.Add(time.Second)}
	id1 := record(t, s, rel)
	id2 := record(t, s, history.Event{Instance: "team", Type: history.Lock, User: "bob", Services: []string{"default:deployment/web"}, Message: "freeze", StartedAt: at, EndedAt: at})
	started := history.Event{Instance: "team", Type: history.Release, User: "ann", Services: []string{"default:deployment/web"}, Commit: "def456", Job: "job-2"}
	nid, err := s.Notify(ctx, history.Notice{Event: started, Started: true})
	if err != nil {
		t.Fatalf("Notify: %v", err)
	}
	s = reopen()
	got, err := s.Notices(ctx, 0, 10)
	if err != nil {
		t.Fatalf("Notices: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("Notices = %d notices, want 3: %+v", len(got), got)
	}
	wantRel := rel
	wantRel.ID = id1
	if diff := cmp.Diff(wantRel, got[0].Event, equalTimes); diff != "" {
		t.Errorf("the release's notice (-want +got):\n%s", diff)
	}
	if got[1].Event.ID != id2 || got[1].Event.Type != history.Lock || got[1].Event.Message != "freeze" || got[1].Started {
		t.Errorf("the lock's notice = %+v", got[1])
	}
	if got[2].ID != nid || !got[2].Started || got[2].Event.ID != 0 || got[2].Event.Commit != "def456" || got[2].Event.Job != "job-2" {
		t.Errorf("the started notice = %+v, want ID %d, Started, no event row, commit def456, job job-2", got[2], nid)
	}
	if !(got[0].ID < got[1].ID && got[1].ID < got[2].ID) {
		t.Errorf("notice IDs do not grow: %d, %d, %d", got[0].ID, got[1].ID, got[2].ID)
	}
	if last, err := s.LastNotice(ctx); err != nil || last != nid {
		t.Errorf("LastNotice = %d, %v; want %d", last, err, nid)
	}
	page, err := s.Notices(ctx, got[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != got[1].ID {
		t.Errorf("Notices(after the first, 1) = %+v, %v; want the second only", page, err)
	}
	if _, err := s.Notify(ctx, history.Notice{Event: history.Event{Type: history.Release}}); err == nil {
		t.Error("Notify without an instance: no error")
	}
}

// testOutboxCursors: a receiver's cursor is kept across a reopen and
// never moves back.
func testOutboxCursors(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	if _, ok, err := s.NoticeCursor(ctx, "chat"); err != nil || ok {
		t.Fatalf("NoticeCursor of a new receiver = ok %v, %v; want none", ok, err)
	}
	for _, id := range []int64{5, 3} {
		if err := s.SetNoticeCursor(ctx, "chat", id); err != nil {
			t.Fatalf("SetNoticeCursor(%d): %v", id, err)
		}
	}
	if err := s.SetNoticeCursor(ctx, "forge", 1); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	for name, want := range map[string]int64{"chat": 5, "forge": 1} {
		got, ok, err := s.NoticeCursor(ctx, name)
		if err != nil || !ok || got != want {
			t.Errorf("NoticeCursor(%s) = %d, %v, %v; want %d", name, got, ok, err, want)
		}
	}
}

// testOutboxPendingAndPrune: the depth and oldest age a receiver sees,
// and a prune that drops old notices without reusing their IDs.
func testOutboxPendingAndPrune(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	base := time.Unix(1700000000, 0)
	var ids []int64
	for i := range 4 {
		at := base.Add(time.Duration(i) * time.Hour)
		ids = append(ids, record(t, s, history.Event{Instance: "team", Type: history.Release, StartedAt: at, EndedAt: at}))
	}
	notices, err := s.Notices(ctx, 0, 10)
	if err != nil || len(notices) != 4 {
		t.Fatalf("Notices = %d, %v", len(notices), err)
	}
	n, oldest, err := s.PendingNotices(ctx, notices[0].ID)
	if err != nil || n != 3 || !oldest.Equal(base.Add(time.Hour)) {
		t.Errorf("PendingNotices(after the first) = %d, %v, %v; want 3, %v", n, oldest, err, base.Add(time.Hour))
	}
	n, oldest, err = s.PendingNotices(ctx, notices[3].ID)
	if err != nil || n != 0 || !oldest.IsZero() {
		t.Errorf("PendingNotices(after the last) = %d, %v, %v; want 0, zero time", n, oldest, err)
	}
	pruned, err := s.PruneNotices(ctx, base.Add(2*time.Hour))
	if err != nil || pruned != 2 {
		t.Errorf("PruneNotices = %d, %v; want 2", pruned, err)
	}
	left, err := s.Notices(ctx, 0, 10)
	if err != nil || len(left) != 2 || left[0].Event.ID != ids[2] {
		t.Errorf("after the prune, Notices = %+v, %v; want the last two", left, err)
	}
	// The history rows stay: only their notices went.
	if evs, err := s.Events(ctx, "team", history.Query{}); err != nil || len(evs) != 4 {
		t.Errorf("after the prune, Events = %d, %v; want 4", len(evs), err)
	}
	s.PruneNotices(ctx, base.Add(10*time.Hour))
	id := record(t, s, history.Event{Instance: "team", Type: history.Unlock})
	after, err := s.Notices(ctx, 0, 10)
	if err != nil || len(after) != 1 || after[0].ID <= notices[3].ID || after[0].Event.ID != id {
		t.Errorf("a notice after everything was pruned = %+v, %v; want one with an ID above %d (IDs are not reused)", after, err, notices[3].ID)
	}
}

// testOutboxConcurrent: events recorded at once each get one notice, and
// a reader that follows the outbox while they are written sees every one
// of them, each once (notices commit in the order of their IDs).
func testOutboxConcurrent(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	const writers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Record(ctx, history.Event{Instance: "team", Type: history.Release, Message: fmt.Sprintf("%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[int64]int{}
	var after int64
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		page, err := s.Notices(ctx, after, 7)
		if err != nil {
			t.Fatalf("Notices: %v", err)
		}
		for _, n := range page {
			seen[n.Event.ID]++
			after = n.ID
		}
		if finished {
			for {
				page, err := s.Notices(ctx, after, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, n := range page {
					seen[n.Event.ID]++
					after = n.ID
				}
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("Record: %v", err)
	}
	if len(seen) != writers*each {
		t.Errorf("the reader saw %d events' notices, want %d", len(seen), writers*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %d's notice seen %d times", id, n)
		}
	}
}
