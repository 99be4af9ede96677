package release

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxd/fluxd/platform"
)

// applyError is a pushed release some of whose workloads failed to apply.
type applyError struct {
	commit string
	ids    []string
	errs   []error
}

func (a *applyError) add(id platform.ID, err error) {
	a.ids = append(a.ids, id.String())
	a.errs = append(a.errs, fmt.Errorf("applying %s: %w", id, err))
}

func (a *applyError) Error() string {
	return fmt.Sprintf("commit %.12s was pushed, but applying %s failed: %v", a.commit, strings.Join(a.ids, ", "), errors.Join(a.errs...))
}

func (a *applyError) Unwrap() []error { return a.errs }

// applyFailed ends a pushed release some of whose workloads failed to
// apply: the workloads that applied are followed to the end of their
// rollout (when the release follows rollouts), then the release fails as
// a whole, rolled back when asked, as a failed rollout is.
func (r *run) applyFailed(ctx context.Context, res *Result, gens map[platform.ID]int64, cause *applyError) error {
	r.e.log.Warn("a pushed release did not apply everywhere", "instance", r.instance, "commit", res.Commit, "error", cause)
	var err error = cause
	if r.o.RolloutTimeout > 0 && len(gens) > 0 {
		r.report(Progress{Stage: StageRollingOut, Commit: res.Commit})
		ferr := r.follow(ctx, gens, r.o, StageRollingOut, res.Commit)
		if ferr != nil && stopping(ctx) {
			return r.e.interrupted(r.instance, res.Commit, ferr)
		}
		if ferr != nil {
			err = fmt.Errorf("%w; and %v", cause, ferr)
		}
	}
	return r.failAndRollBack(ctx, res.Plan, res.Commit, err)
}
