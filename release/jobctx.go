package release

import (
	"context"
	"time"

	"github.com/fluxd/fluxd/history"
)

// What the job queue (release/jobs) hands the engine through a job's
// context, and what it needs of the engine's words.

// jobKey keys the ID of the job a release runs for in its context.
type jobKey struct{}

// WithJob is ctx carrying the job's ID, for the events the engine
// records while running it.
func WithJob(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, jobKey{}, id)
}

// JobID is the ID of the job ctx runs for (see WithJob), or "".
func JobID(ctx context.Context) string {
	id, _ := ctx.Value(jobKey{}).(string)
	return id
}

// jobRecorder names the job in each event recorded while running one.
type jobRecorder struct{ Recorder }

func (r jobRecorder) Record(ctx context.Context, ev history.Event) (int64, error) {
	if id := JobID(ctx); id != "" && ev.Job == "" {
		ev.Job = id
	}
	return r.Recorder.Record(ctx, ev)
}

// NewEvent is the history event of a release of plan, as the engine
// records it: the queue stores it in the notice of a release that began
// rolling out.
func NewEvent(instance string, spec Spec, plan *Plan, typ history.Type, start time.Time) history.Event {
	return event(instance, spec, plan, typ, start)
}
