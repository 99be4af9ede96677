package release

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// cancelledEarly returns err of a release that ended before it planned
// (waiting for the apply lock, or while planning); when a user's cancel
// ended it, the cancel is recorded in history, naming the services asked
// for, since no plan names them.
func (e *Engine) cancelledEarly(ctx context.Context, instance string, spec Spec, start time.Time, err error) error {
	if !userCancelled(ctx) {
		return err
	}
	err = fmt.Errorf("cancelled before the release was planned; nothing was changed: %w", err)
	plan := &Plan{}
	for _, id := range spec.Services {
		plan.Items = append(plan.Items, Item{Service: id, Action: Update})
	}
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
