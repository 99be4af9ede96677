package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
)

// testLiveEvents: live events are read back in order, from any point,
// with their bytes as written, and pruned by age.
func testLiveEvents(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	if last, err := s.LastLive(ctx); err != nil || last != 0 {
		t.Fatalf("LastLive on an empty store = %d, %v", last, err)
	}
	old := time.Unix(1700000000, 0)
	evs := []history.LiveEvent{
		{Instance: "team", Type: "job", Data: []byte(`{"job":{"id":"j1"}}`), At: old},
		{Instance: "", Type: "automation", Data: []byte(`{}`), At: old.Add(time.Hour)},
		{Instance: "other", Type: "log", Data: []byte("{\"text\":\"\u00e9\"}")},
	}
	if err := s.AppendLive(ctx, evs[:2]); err != nil {
		t.Fatalf("AppendLive: %v", err)
	}
	if err := s.AppendLive(ctx, evs[2:]); err != nil {
		t.Fatalf("AppendLive: %v", err)
	}
	s = reopen()
	got, err := s.LiveAfter(ctx, 0, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("LiveAfter(0) = %d events, %v; want 3", len(got), err)
	}
	for i, ev := range got {
		if ev.Instance != evs[i].Instance || ev.Type != evs[i].Type || string(ev.Data) != string(evs[i].Data) {
			t.Errorf("event %d = %+v, want %+v", i, ev, evs[i])
		}
		if i > 0 && ev.ID <= got[i-1].ID {
			t.Errorf("IDs do not grow: %d after %d", ev.ID, got[i-1].ID)
		}
	}
	if !got[0].At.Equal(old) {
		t.Errorf("At = %v, want %v", got[0].At, old)
	}
	if last, err := s.LastLive(ctx); err != nil || last != got[2].ID {
		t.Errorf("LastLive = %d, %v; want %d", last, err, got[2].ID)
	}
	if page, err := s.LiveAfter(ctx, got[0].ID, 1); err != nil || len(page) != 1 || page[0].ID != got[1].ID {
		t.Errorf("LiveAfter(first, 1) = %+v, %v", page, err)
	}
	if n, err := s.PruneLive(ctx, old.Add(2*time.Hour)); err != nil || n != 2 {
		t.Errorf("PruneLive = %d, %v; want 2", n, err)
	}
	if left, err := s.LiveAfter(ctx, 0, 10); err != nil || len(left) != 1 || left[0].Type != "log" {
		t.Errorf("after the prune: %+v, %v", left, err)
	}
}
