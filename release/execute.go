package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// Stages of an execution, in order.
const (
	StageQueued     = "queued"
	StageCloning    = "cloning"
	StageEditing    = "editing"
	StageCommitting = "committing"
	StagePushing    = "pushing"
	StageApplying   = "applying"
	StageRollingOut = "rolling out"
	StageDone       = "done"
	StageFailed     = "failed"
)

// pushRetries bounds how often a release is re-applied on a newer
// revision when someone else pushed in the meantime.
const pushRetries = 3

// Progress is a report from a running execution.
type Progress struct {
	Stage string
	// Workloads are the replica counts of the changed workloads while
	// they roll out.
	Workloads []WorkloadProgress
	// Commit is set once pushed.
	Commit string
}

// WorkloadProgress is one workload's rollout.
type WorkloadProgress struct {
	Service  platform.ID
	Replicas platform.Replicas
	Done     bool
}

// ExecOptions tune an execution.
type ExecOptions struct {
	// Checksum, when set, must equal the checksum of the plan as it is
	// computed now, or the execution fails with a Precondition error.
	Checksum string
	// Report receives progress; nil discards it.
	Report func(Progress)
	// RolloutTimeout, when positive, makes the execution wait until every
	// changed workload has rolled out, failing after this long (or when
	// the controller gives up, e.g. at a Deployment's progress deadline).
	RolloutTimeout time.Duration
	// PollInterval is how often rollouts are checked; default 250ms.
	PollInterval time.Duration
}

// Execute plans spec and carries it out for instance: edit, one commit,
// push (re-applying the edits on a newer revision if someone else pushed),
// apply, follow the rollout, record. If nothing changes, nothing is
// committed. A cancelled ctx before the push stops it with nothing pushed.
func (e *Engine) Execute(ctx context.Context, instance string, spec Spec, typ history.Type, o ExecOptions) (*Result, error) {
	report := func(p Progress) {
		if o.Report != nil {
			o.Report(p)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	report(Progress{Stage: StageCloning})
	plan, m, err := e.plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	if o.Checksum != "" && o.Checksum != plan.Checksum {
		err := fluxerr.New(fluxerr.Precondition, fmt.Errorf("the plan you confirmed no longer matches: %s", e.WhatChanged(o.Checksum, plan)),
			"Nothing was changed. Look at the new plan (release --dry-run) and confirm it again.")
		return nil, e.fail(ctx, instance, spec, plan, start, "", err)
	}
	res := &Result{Plan: plan}
	if plan.Updates() == 0 {
		report(Progress{Stage: StageDone})
		return res, nil
	}
	author := gitrepo.Signature{Name: spec.User}
	var files map[string][]byte
	for attempt := 1; ; attempt++ {
		report(Progress{Stage: StageEditing})
		if files, err = e.edit(plan, m); err != nil {
			return nil, e.fail(ctx, instance, spec, plan, start, "", err)
		}
		report(Progress{Stage: StageCommitting})
		var commit string
		commit, err = e.repo.Commit(ctx, plan.Revision, files, commitMessage(instance, spec, plan), author)
		if err == nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, e.fail(ctx, instance, spec, plan, start, "", fmt.Errorf("cancelled before the push; nothing was pushed: %w", cerr))
			}
			report(Progress{Stage: StagePushing})
			err = e.repo.Push(ctx, commit)
		}
		if err == nil {
			res.Commit = commit
			break
		}
		if !errors.Is(err, gitrepo.ErrMoved) || attempt == pushRetries {
			return nil, e.fail(ctx, instance, spec, plan, start, "", err)
		}
		// Someone else pushed: keep their commit, and make the same edits
		// again on top of it.
		e.log.Info("the branch moved during the release; re-applying the edits on the new revision", "attempt", attempt, "error", err)
		rev, m2, merr := e.manifests(ctx)
		if merr != nil {
			return nil, e.fail(ctx, instance, spec, plan, start, "", merr)
		}
		plan.Revision, m = rev, m2
	}
	e.log.Info("release pushed", "instance", instance, "commit", res.Commit, "updates", plan.Updates(), "user", spec.User)
	report(Progress{Stage: StageApplying, Commit: res.Commit})
	gens := map[platform.ID]int64{}
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		doc, err := gitrepo.WorkloadDocument(files[it.File], it.Service)
		var gen int64
		if err == nil {
			gen, err = e.cluster.Apply(ctx, it.Service, doc)
		}
		if err != nil {
			return nil, e.fail(ctx, instance, spec, plan, start, res.Commit,
				fmt.Errorf("commit %.12s was pushed, but applying %s failed: %w", res.Commit, it.Service, err))
		}
		gens[it.Service] = gen
		e.log.Info("applied", "service", it.Service.String(), "commit", res.Commit, "generation", gen)
	}
	if o.RolloutTimeout > 0 {
		report(Progress{Stage: StageRollingOut, Commit: res.Commit})
		if err := e.followRollout(ctx, gens, o, func(w []WorkloadProgress) {
			report(Progress{Stage: StageRollingOut, Workloads: w, Commit: res.Commit})
		}); err != nil {
			return nil, e.fail(ctx, instance, spec, plan, start, res.Commit, err)
		}
	}
	ev := event(instance, spec, plan, typ, start)
	ev.Commit = res.Commit
	if _, err := e.recorder.Record(ctx, ev); err != nil {
		e.log.Error("recording the release in history failed", "error", err, "commit", res.Commit)
	}
	report(Progress{Stage: StageDone, Commit: res.Commit})
	return res, nil
}

// followRollout waits until every workload in gens has rolled out to its
// generation, reporting replica counts as they change.
func (e *Engine) followRollout(ctx context.Context, gens map[platform.ID]int64, o ExecOptions, report func([]WorkloadProgress)) error {
	every := o.PollInterval
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	deadline := time.Now().Add(o.RolloutTimeout)
	var last string
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
					return fmt.Errorf("the rollout of %s failed: %s", w.ID, w.Stuck)
				}
			}
		}
		if len(progress) < len(gens) {
			done = false
		}
		if key := fmt.Sprint(progress); key != last {
			last = key
			report(progress)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			var waiting []string
			for _, p := range progress {
				if !p.Done {
					r := p.Replicas
					waiting = append(waiting, fmt.Sprintf("%s (%d/%d updated, %d ready, %d available)", p.Service, r.Updated, r.Desired, r.Ready, r.Available))
				}
			}
			return fmt.Errorf("the rollout did not finish within %v: still waiting for %v", o.RolloutTimeout, waiting)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while rolling out: %w", ctx.Err())
		case <-time.After(every):
		}
	}
}
