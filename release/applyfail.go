package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
func (e *Engine) applyFailed(ctx context.Context, instance string, spec Spec, res *Result, gens map[platform.ID]int64, cause *applyError, o ExecOptions, report func(Progress), start time.Time) error {
	e.log.Warn("a pushed release did not apply everywhere", "instance", instance, "commit", res.Commit, "error", cause)
	var err error = cause
	if o.RolloutTimeout > 0 && len(gens) > 0 {
		report(Progress{Stage: StageRollingOut, Commit: res.Commit})
		ferr := e.followRollout(ctx, gens, o, func(w []WorkloadProgress) {
			report(Progress{Stage: StageRollingOut, Workloads: w, Commit: res.Commit})
		})
		if ferr != nil && stopping(ctx) {
			return e.interrupted(instance, res.Commit, ferr)
		}
		if ferr != nil {
			err = fmt.Errorf("%w; and %v", cause, ferr)
		}
	}
	return e.failAndRollBack(ctx, instance, spec, res.Plan, res.Commit, err, o, report, start)
}
