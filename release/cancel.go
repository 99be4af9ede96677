package release

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// cancelledEarly returns err of a release that ended before it planned
// (waiting for the apply lock, or while planning). A job's end is
// recorded in history, naming the services asked for, since no plan
// names them: as cancelled when a user's cancel ended it, else as failed.
func (e *Engine) cancelledEarly(ctx context.Context, instance string, spec Spec, jobID string, start time.Time, err error) error {
	plan := &Plan{}
	for _, id := range spec.Services {
		plan.Items = append(plan.Items, Item{Service: id, Action: Update})
	}
	if !userCancelled(ctx) {
		if jobID == "" {
			return err // no job: the caller hears of it, and nothing ran
		}
		// A job that fails before its plan (a service locked while it
		// waited in the queue or while another replica took it over):
		// its outcome is recorded, as every job's is.
		return e.failAs(ctx, history.Failed, instance, spec, plan, start, "", fmt.Errorf("nothing was changed: %w", err))
	}
	err = fmt.Errorf("cancelled before the release was planned; nothing was changed: %w", err)
	return e.failAs(context.WithoutCancel(ctx), history.Cancelled, instance, spec, plan, start, "", err)
}

// dropLocalCommit ends a release cancelled after it committed and before
// it pushed: the clone is reset to the remote (so that no read, such as
// the status page's cached plan, sees the commit that was never pushed),
// and the cancel is recorded.
func (e *Engine) dropLocalCommit(ctx context.Context, instance string, spec Spec, plan *Plan, start time.Time) error {
	err := fmt.Errorf("cancelled before the push; nothing was pushed: %w", context.Cause(ctx))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, serr := e.fetch(rctx); serr != nil {
		e.log.Warn("resetting the clone after a cancelled release failed; the next fetch resets it", "error", serr)
	}
	typ := history.Failed
	if userCancelled(ctx) {
		typ = history.Cancelled
	}
	return e.failAs(context.WithoutCancel(ctx), typ, instance, spec, plan, start, "", err)
}
