package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// Stages of an execution, in order.
const (
	StageQueued      = "queued"
	StageCloning     = "cloning"
	StageEditing     = "editing"
	StageCommitting  = "committing"
	StagePushing     = "pushing"
	StageApplying    = "applying"
	StageRollingOut  = "rolling out"
	StageRollingBack = "rolling back"
	StageDone        = "done"
	StageFailed      = "failed"
	StageCancelled   = "cancelled"
)

// Progress is a report from a running execution.
type Progress struct {
	Stage string
	// Workloads are the replica counts of the changed workloads while
	// they roll out.
	Workloads []WorkloadProgress
	// Commit is set once pushed.
	Commit string
	// Plan is set when committing, so that the job can be taken over
	// (applied and followed) by another fluxd if this one dies. It
	// records the workloads the job applies (Item.Targets).
	Plan *Plan
	// Note, at the end, says why a job that succeeded applied nothing
	// (NothingToApply).
	Note string
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
	// HelmGrace is how long a rollout waits for a Helm controller to act
	// on the HelmReleases it applied before asking whether one runs;
	// default helmGrace, at most half of RolloutTimeout.
	HelmGrace time.Duration
	// RollbackOnFailure reverts a pushed release whose rollout fails or
	// that is cancelled after its push.
	RollbackOnFailure bool
	// JobID, when set, is written into the commit message as a trailer
	// (JobTrailer), so that a fluxd taking over can tell whether the job
	// pushed.
	JobID string
	// RollingBack, for Resume, says that the job was rolling its release
	// back when its fluxd stopped: the take-over finishes the rollback
	// instead of following the release.
	RollingBack bool
	// Started, when set, is when the job began (a taken-over job began
	// before this fluxd), for history.
	Started time.Time
	// RolloutStarted, when set, is when a taken-over job's rollout began:
	// its RolloutTimeout runs from then, not again from the take-over.
	RolloutStarted time.Time
}

// JobTrailer is the commit message line naming the job that pushed it.
func JobTrailer(id string) string { return "Fluxd-Job: " + id }

// run is one job's execution, made by Execute or Resume: what it
// releases, for whom, how, and since when. The steps of a release are
// its methods, so that they share the job's state instead of passing it
// along.
type run struct {
	e        *Engine
	instance string
	spec     Spec
	typ      history.Type
	o        ExecOptions
	// start is when the job began, for history.
	start time.Time
}

// newRun makes the run of one job, begun at start.
func (e *Engine) newRun(instance string, spec Spec, typ history.Type, o ExecOptions, start time.Time) *run {
	return &run{e: e, instance: instance, spec: spec, typ: typ, o: o, start: start}
}

// report passes p to ExecOptions.Report, if any.
func (r *run) report(p Progress) {
	if r.o.Report != nil {
		r.o.Report(p)
	}
}

// fail records the job as failed with err (plan and commit as far as it
// got) and returns the error to give back.
func (r *run) fail(ctx context.Context, plan *Plan, commit string, err error) error {
	return r.e.fail(ctx, r.instance, r.spec, plan, r.start, commit, err)
}

// Execute plans spec and carries it out for instance: edit, one commit,
// push (re-applying the edits on a newer revision if someone else pushed),
// apply, follow the rollout, record. If nothing changes, nothing is
// committed. A cancelled ctx before the push stops it with nothing pushed.
func (e *Engine) Execute(ctx context.Context, instance string, spec Spec, typ history.Type, o ExecOptions) (*Result, error) {
	// One deployment at a time, rollout included; planning (e.git) stays
	// free while a rollout is followed.
	e.deploy.Lock()
	defer e.deploy.Unlock()
	r := e.newRun(instance, spec, typ, o, time.Now())
	res, gens, err := r.pushAndApply(ctx)
	if ae := (*applyError)(nil); errors.As(err, &ae) {
		return nil, r.applyFailed(ctx, res, gens, ae)
	}
	if err != nil {
		return res, err
	}
	return r.finish(ctx, res, gens)
}

// Resume finishes a release job that a fluxd which stopped (a leader that
// died, a restart) had pushed as commit: it applies the plan's workloads
// as git has them now, follows their rollout and records the release,
// as Execute would have. Nothing is committed again.
func (e *Engine) Resume(ctx context.Context, instance string, spec Spec, plan *Plan, commit string, typ history.Type, o ExecOptions) (*Result, error) {
	e.deploy.Lock()
	defer e.deploy.Unlock()
	start := o.Started
	if start.IsZero() {
		start = time.Now()
	}
	r := e.newRun(instance, spec, typ, o, start)
	if o.RollingBack {
		// The previous fluxd stopped while it rolled the release back:
		// finish that (its revert may or may not have been pushed), never
		// follow the release again.
		e.log.Warn("took over a job that was rolling back: finishing the rollback", "instance", instance, "commit", commit)
		cause := fmt.Errorf("the release of commit %.12s was being rolled back when fluxd stopped", commit)
		return nil, r.failAndRollBack(ctx, plan, commit, cause)
	}
	r.report(Progress{Stage: StageApplying, Commit: commit})
	e.warnLegacy(plan, "the take-over")
	// Checked on the fetch that is applied, under the same lock: a revert
	// pushed meanwhile is either seen by the check or not applied.
	gens, err := e.applyFromGit(ctx, plan, func(m *gitrepo.Manifests) error {
		return e.stillReleased(ctx, plan, commit, o.JobID, m)
	})
	if ae := (*applyError)(nil); errors.As(err, &ae) {
		ae.commit = commit
		return nil, r.applyFailed(ctx, &Result{Plan: plan, Commit: commit}, gens, ae)
	}
	if err != nil {
		return nil, r.fail(ctx, plan, commit, fmt.Errorf("taking over the job that pushed commit %.12s: %w", commit, err))
	}
	e.log.Info("took over a pushed release: applied it", "instance", instance, "commit", commit)
	return r.finish(ctx, &Result{Plan: plan, Commit: commit}, gens)
}

// finish follows a pushed and applied release's rollout (rolling it back
// on failure or cancel when asked) and records it. Every release that
// ends succeeded, Execute's and Resume's, ends here, past
// mayEndSucceeded: one with nothing to change says so and records
// nothing.
func (r *run) finish(ctx context.Context, res *Result, gens map[platform.ID]int64) (*Result, error) {
	e := r.e
	plan := res.Plan
	note, err := mayEndSucceeded(plan, gens)
	if err != nil {
		return nil, r.fail(ctx, plan, res.Commit, err)
	}
	if note != "" {
		e.log.Info("release job: "+note, "instance", r.instance, "commit", res.Commit)
	}
	if res.Commit == "" {
		r.report(Progress{Stage: StageDone, Note: note})
		return res, nil
	}
	var unrolled []platform.ID // nothing reported on their rollout
	if r.o.RolloutTimeout > 0 {
		r.report(Progress{Stage: StageRollingOut, Commit: res.Commit})
		err := r.follow(ctx, gens, r.o, StageRollingOut, res.Commit)
		var nr *NotRolledOut
		if errors.As(err, &nr) {
			e.log.Warn("release applied, not rolled out: nothing reported on its rollout", "commit", res.Commit, "why", nr.Error())
			res.NotRolledOut, err = nr.Error(), nil
			unrolled = nr.Services
		}
		if err != nil {
			if stopping(ctx) {
				// fluxd is stopping: the release stays pushed and
				// applied, and the next fluxd follows its rollout.
				return nil, e.interrupted(r.instance, res.Commit, err)
			}
			return nil, r.failAndRollBack(ctx, plan, res.Commit, err)
		}
	}
	r.record(ctx, res, unrolled)
	if res.NotRolledOut != "" {
		r.report(Progress{Stage: StageNotRolledOut, Commit: res.Commit})
		return res, nil
	}
	r.report(Progress{Stage: StageDone, Commit: res.Commit, Note: note})
	return res, nil
}
