package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
)

// A job's log is kept across a reopen, read from a sequence number on,
// and only by the job's own instance.
func TestJobLogKeptAndKeyedByInstance(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	lines := []history.JobLogLine{
		{JobID: "j1", Instance: "team-a", Seq: 1, Time: t0, Stage: "cloning", Text: "fetching the git remote"},
		{JobID: "j1", Instance: "team-a", Seq: 2, Time: t0.Add(time.Second), Stage: "pushing", Text: "pushing commit abc"},
		{JobID: "j1", Instance: "team-a", Seq: 3, Time: t0.Add(2 * time.Second), Stage: "failed", Text: "the rollout of x failed"},
	}
	for _, l := range lines {
		if err := s.AppendJobLog(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// The same line again (a retried save) changes nothing.
	if err := s.AppendJobLog(ctx, history.JobLogLine{JobID: "j1", Instance: "team-a", Seq: 2, Time: t0, Text: "other"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendJobLog(ctx, history.JobLogLine{JobID: "j1", Instance: "team-a", Text: "no seq"}); err == nil {
		t.Error("a line without a sequence number was stored")
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.JobLog(ctx, "team-a", "j1", 0)
	if err != nil {
		t.Fatal(err)
	}
	eqTime := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if diff := cmp.Diff(lines, got, eqTime); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	got, err = s.JobLog(ctx, "team-a", "j1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines[2:], got, eqTime); diff != "" {
		t.Errorf("log after 2 (-want +got):\n%s", diff)
	}
	other, err := s.JobLog(ctx, "team-b", "j1", 0)
	if err != nil || len(other) != 0 {
		t.Errorf("team-b reads team-a's job log: %v, %v", other, err)
	}
}
