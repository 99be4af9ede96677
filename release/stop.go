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
// the next fluxd to lead carries it on (Queue.Recover).
var ErrInterrupted = errors.New("fluxd stopped while the job ran; it is left for the next fluxd to carry on")

// userCancelled reports whether ctx ended because a user cancelled the
// job.
func userCancelled(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrCancelled)
}

// stopping reports whether ctx ended because fluxd is stopping, not
// because a user cancelled the job.
func stopping(ctx context.Context) bool {
	return ctx.Err() != nil && !userCancelled(ctx)
}
