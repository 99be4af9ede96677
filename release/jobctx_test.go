package release

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/history"
)

// The events the engine records while running a job name the job its
// context carries (release/jobs sets it with WithJob); an event that names
// a job already keeps it.
func TestRecordedEventsNameTheJob(t *testing.T) {
	t.Parallel()
	rec := &recRecorder{}
	r := jobRecorder{rec}
	ctx := context.Background()
	for _, ev := range []history.Event{{Type: history.Release}, {Type: history.Rollback, Job: "other"}} {
		if _, err := r.Record(WithJob(ctx, "j1"), ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Record(ctx, history.Event{Type: history.Release}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range rec.events {
		got = append(got, ev.Job)
	}
	if len(got) != 3 || got[0] != "j1" || got[1] != "other" || got[2] != "" {
		t.Errorf("recorded jobs = %q; want [j1 other \"\"]", got)
	}
}
