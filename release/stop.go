package release

import (
	"context"
	"errors"
)

// A job's context ends for one of two reasons, and they must never be
// confused: a user cancelled the job (it stops before its push, or rolls
// back what it pushed), or fluxd itself is stopping (SIGTERM on a rolling
// upgrade or a node drain, or a lost leadership). A stop is not a cancel:
// the job is left as it is, pushing nothing and recording nothing, for
// whoever takes over (this process after a restart, or the new leader).

// ErrCancelled is the cause a job's context carries when a user cancels
// it (context.WithCancelCause).
var ErrCancelled = errors.New("cancelled by a user")

// ErrInterrupted is returned for a job whose fluxd stopped while it ran:
// nothing was recorded or reverted, and the stored job stays live so that
// the next fluxd to lead carries it on (jobs.Queue.Recover, in release/jobs).
var ErrInterrupted = errors.New("fluxd stopped while the job ran; it is left for the next fluxd to carry on")

// userCancelled reports whether ctx ended because a user cancelled the
// job.
func userCancelled(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrCancelled)
}

// rootKey keys fluxd's own context (the one a stop cancels) in a job's
// context, so that work which must outlive a user's cancel (a rollback)
// still ends when fluxd stops.
type rootKey struct{}

// WithRoot records root, fluxd's own context, in a job's context: the
// queue calls it for every job it runs.
func WithRoot(job, root context.Context) context.Context {
	return context.WithValue(job, rootKey{}, root)
}

// stopping reports whether fluxd is stopping (rather than a user having
// cancelled the job): its own context ended, or, without one recorded,
// ctx ended for another cause than ErrCancelled.
func stopping(ctx context.Context) bool {
	if root, ok := ctx.Value(rootKey{}).(context.Context); ok {
		return root.Err() != nil
	}
	return ctx.Err() != nil && !userCancelled(ctx)
}

// detach returns a context that a user's cancel of the job does not end
// (a rollback must finish), but fluxd's stop does.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	root, ok := ctx.Value(rootKey{}).(context.Context)
	if !ok {
		return d, func() { cancel(nil) }
	}
	stop := context.AfterFunc(root, func() { cancel(context.Cause(root)) })
	return d, func() { stop(); cancel(nil) }
}
