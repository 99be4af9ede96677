package jobs

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
)

// Notifier stores a notice that has no history row (history.Outbox's
// Notify): a release that began rolling out, for the commit statuses'
// "pending".
type Notifier interface {
	Notify(ctx context.Context, n history.Notice) (int64, error)
}

// NotifyStarts has the queue tell n when a job's release begins rolling
// out its commit. Set it before Run.
func (q *Queue) NotifyStarts(n Notifier) { q.notifier = n }

// noticeStarted stores the notice of e's release rolling out commit,
// once per run of the job. The queue's lock is not held.
func (q *Queue) noticeStarted(ctx context.Context, e *entry, typ history.Type, commit string) {
	if q.notifier == nil || e.startNoticed {
		return
	}
	e.startNoticed = true
	q.mu.Lock()
	planJSON := e.job.Plan
	q.mu.Unlock()
	plan := &release.Plan{}
	_ = json.Unmarshal(planJSON, plan)
	ev := release.NewEvent(e.job.Instance, e.spec, plan, typ, time.Now())
	ev.Commit, ev.Job = commit, e.job.ID
	if _, err := q.notifier.Notify(context.WithoutCancel(ctx), history.Notice{Event: ev, Started: true}); err != nil {
		q.log.Warn("storing the notice of a release rolling out failed; its receivers will not hear of its start", "job", e.job.ID, "error", err)
	}
}
