package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
)

func TestRecordAndQueryKeyedByInstance(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	rel := history.Event{
		Instance: "team-a", Type: history.Release, Services: []string{"default:deployment/a", "default:deployment/b"},
		User: "alice", Message: "ship it", Commit: "abc123",
		Changes:   []history.Change{{Service: "default:deployment/a", Container: "app", From: "r/a:1", To: "r/a:2"}},
		StartedAt: t0, EndedAt: t0.Add(time.Second),
	}
	if _, err := s.Record(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, history.Event{Instance: "team-b", Type: history.Automate, Services: []string{"default:deployment/a"}, StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, history.Event{Instance: "team-a", Type: history.Automate, Services: []string{"default:deployment/b"}, StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Reopen: the data is in the file, and migrating again is a no-op.
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got, err := s.Events(ctx, "team-a", history.Query{Service: "default:deployment/a"})
	if err != nil {
		t.Fatal(err)
	}
	rel.ID = 1
	want := []history.Event{rel}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("team-a events for a (-want +got):\n%s", diff)
	}
	all, err := s.Events(ctx, "team-a", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Type != history.Automate || all[1].Type != history.Release {
		t.Errorf("team-a events = %+v; want automate then release, newest first", all)
	}
	other, err := s.Events(ctx, "team-b", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 1 || other[0].Type != history.Automate {
		t.Errorf("team-b sees %+v; want only its own automate event", other)
	}
	none, err := s.Events(ctx, "team-c", history.Query{})
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("team-c events = %v, %v; want an empty, non-nil list", none, err)
	}
}

func TestOpenBadPath(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir", "h.db"))
	if err == nil {
		t.Fatal("Open succeeded in a missing directory")
	}
}

// History filters by type and by user (a part of the name, any case),
// together with the service filter.
func TestEventsFilteredByTypeAndUser(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for _, ev := range []history.Event{
		{Type: history.Release, User: "Alice", Services: []string{"ns:deployment/a"}},
		{Type: history.Failed, User: "alice", Services: []string{"ns:deployment/a"}},
		{Type: history.Failed, User: "bob", Services: []string{"ns:deployment/b"}},
		{Type: history.Lock, User: "automator", Services: []string{"ns:deployment/a"}},
	} {
		ev.Instance, ev.StartedAt = "i", t0
		if _, err := s.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		q    history.Query
		want []string
	}{
		{history.Query{Type: history.Failed}, []string{"bob", "alice"}},
		{history.Query{User: "ALI"}, []string{"alice", "Alice"}},
		{history.Query{Type: history.Failed, User: "ali", Service: "ns:deployment/a"}, []string{"alice"}},
		{history.Query{Type: history.Rollback}, nil},
	} {
		evs, err := s.Events(ctx, "i", tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, ev.User)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.q, diff)
		}
	}
}
