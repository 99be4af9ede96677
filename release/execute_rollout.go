package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/platform"
)

// goneAfter is how long a followed workload may be absent from the
// cluster (longer than the informers take to see a new one) before it
// counts as deleted while it rolled out.
var goneAfter = 15 * time.Second

// followRollout waits until every workload in gens has rolled out to its
// generation, reporting replica counts as they change.
func (e *Engine) followRollout(ctx context.Context, gens map[platform.ID]int64, o ExecOptions, report func([]WorkloadProgress)) error {
	every := o.PollInterval
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	deadline := time.Now().Add(o.RolloutTimeout)
	if !o.RolloutStarted.IsZero() {
		deadline = o.RolloutStarted.Add(o.RolloutTimeout)
	}
	var last string
	missing := map[platform.ID]time.Time{}
	started := time.Now()
	if !o.RolloutStarted.IsZero() {
		started = o.RolloutStarted
	}
	grace := helmGrace
	if o.HelmGrace > 0 {
		grace = o.HelmGrace
	}
	grace = min(grace, o.RolloutTimeout/2)
	looked := false
	var look helmLook
	for {
		ws, err := e.cluster.Workloads(ctx)
		if err != nil {
			return err
		}
		var progress []WorkloadProgress
		done := true
		for _, w := range ws {
			gen, ok := gens[w.ID]
			if !ok {
				continue
			}
			ok = w.RolledOut(gen)
			progress = append(progress, WorkloadProgress{Service: w.ID, Replicas: w.Replicas, Done: ok})
			if !ok {
				done = false
				if w.Stuck != "" && w.ObservedGeneration >= gen {
					return e.rolloutError(ctx, w.ID, w.Stuck)
				}
			}
		}
		if len(progress) < len(gens) {
			done = false
			seen := map[platform.ID]bool{}
			for _, p := range progress {
				seen[p.Service] = true
			}
			for id := range gens {
				switch since, ok := missing[id]; {
				case seen[id]:
					delete(missing, id)
				case !ok:
					missing[id] = time.Now()
				case time.Since(since) > goneAfter:
					return fmt.Errorf("%s is no longer in the cluster: it was deleted while it rolled out", id)
				}
			}
		}
		if key := fmt.Sprint(progress); key != last {
			last = key
			report(progress)
		}
		if done {
			return nil
		}
		if !looked && len(progress) == len(gens) && time.Since(started) >= grace {
			var nr *NotRolledOut
			if nr, looked = e.unattended(ctx, ws, gens, o.RolloutTimeout, grace, time.Since(started), &look); nr != nil {
				return nr
			}
		}
		if time.Now().After(deadline) {
			if nr := unreported(ws, gens, o.RolloutTimeout); nr != nil && len(progress) == len(gens) {
				return nr
			}
			for _, p := range progress {
				if !p.Done {
					r := p.Replicas
					return e.rolloutError(ctx, p.Service, fmt.Sprintf("it did not finish within the rollout timeout of %v (%d/%d updated, %d ready, %d available)", o.RolloutTimeout, r.Updated, r.Desired, r.Ready, r.Available))
				}
			}
			return fmt.Errorf("the rollout did not finish within %v", o.RolloutTimeout)
		}
		select {
		case <-ctx.Done():
			if userCancelled(ctx) {
				return errors.New("cancelled by a user while it rolled out")
			}
			return fmt.Errorf("stopped while rolling out: %w", context.Cause(ctx))
		case <-time.After(every):
		}
	}
}

// follow follows the rollout of gens as followRollout does, reporting
// the workloads' progress at stage, for commit.
func (r *run) follow(ctx context.Context, gens map[platform.ID]int64, o ExecOptions, stage, commit string) error {
	return r.e.followRollout(ctx, gens, o, func(w []WorkloadProgress) {
		r.report(Progress{Stage: stage, Workloads: w, Commit: commit})
	})
}

// rolloutError names the workload whose rollout failed and what its pods
// report.
func (e *Engine) rolloutError(ctx context.Context, id platform.ID, why string) error {
	msg := fmt.Sprintf("the rollout of %s failed: %s", id, why)
	if pods := e.cluster.Diagnose(context.WithoutCancel(ctx), id); pods != "" {
		msg += "; its pods report: " + pods
	}
	return errors.New(msg)
}
