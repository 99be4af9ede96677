package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// pushRetries bounds how often a release is re-applied on a newer
// revision when someone else pushed in the meantime.
const pushRetries = 3

// pushAndApply plans, edits, commits, pushes and applies, holding the git
// lock. It returns the generations the rollouts must reach; a Result
// without a commit means there was nothing to change.
func (r *run) pushAndApply(ctx context.Context) (*Result, map[platform.ID]int64, error) {
	if err := r.spec.Validate(); err != nil {
		return nil, nil, r.planFailed(ctx, err)
	}
	r.report(Progress{Stage: StageCloning})
	// The registry is read before the git lock is taken (planWarm), and
	// the plan under the lock answers from those reads: a registry that
	// stalls holds this job, never git.
	lister := newImageCache(r.e.images)
	plan, m, err := r.plan(ctx, lister)
	if err != nil {
		return nil, nil, err
	}
	defer r.e.unlockDeploy()
	if r.spec.Promotion != nil && plan.Updates() == 0 {
		// A promotion is idempotent: its services run the bundle
		// already (an earlier job of the same promotion, recovered
		// after a restart, got there first), so there is nothing to
		// do, whatever the confirmed plan said.
		return &Result{Plan: plan}, nil, nil
	}
	if r.o.Checksum != "" && r.o.Checksum != plan.Checksum {
		err := fluxerr.New(fluxerr.Precondition, fmt.Errorf("the plan you confirmed no longer matches: %s", r.e.WhatChanged(r.o.Checksum, plan)),
			"Nothing was changed. Look at the new plan (release --dry-run) and confirm it again.")
		return nil, nil, r.fail(ctx, plan, "", err)
	}
	res := &Result{Plan: plan}
	if plan.Updates() == 0 {
		return res, nil, nil // finish says so
	}
	plan, m, files, err := r.editAndPush(ctx, res, lister, plan, m)
	if err != nil {
		return nil, nil, err
	}
	if res.Commit == "" {
		return res, nil, nil // finish says so
	}
	r.e.log.Info("release pushed", "instance", r.instance, "commit", res.Commit, "updates", plan.Updates(), "user", r.spec.User)
	r.e.pushed(res.Commit)
	r.report(Progress{Stage: StageApplying, Commit: res.Commit})
	gens, err := r.apply(ctx, plan, files, m, res.Commit)
	return res, gens, err
}

// planFailed ends a job whose planning failed, before anything was
// changed, and returns the error to give back.
func (r *run) planFailed(ctx context.Context, err error) error {
	if stopping(ctx) {
		return r.e.interrupted(r.instance, "", err)
	}
	return r.e.cancelledEarly(ctx, r.instance, r.spec, r.o.JobID, r.start, err)
}

// plan reads the registry, takes the git lock and plans under it,
// starting again when git changed meanwhile. On success it returns
// holding the git lock; its errors are the job's end (planFailed).
func (r *run) plan(ctx context.Context, lister *imageCache) (*Plan, *gitrepo.Manifests, error) {
	e := r.e
	for attempt := 1; ; attempt++ {
		if err := e.planWarm(ctx, r.spec, lister); err != nil {
			return nil, nil, r.planFailed(ctx, err)
		}
		if err := e.lockDeploy(ctx); err != nil {
			return nil, nil, r.planFailed(ctx, err)
		}
		p, pm, retry, err := e.planLocked(ctx, r.spec, lister)
		if err == nil && !retry {
			return p, pm, nil
		}
		e.unlockDeploy()
		if err != nil {
			return nil, nil, r.planFailed(ctx, err)
		}
		if attempt == warmAttempts {
			return nil, nil, r.planFailed(ctx, fluxerr.New(fluxerr.Unavailable, errors.New("git changed while the release read the registry, several times in a row"),
				"Nothing was changed. Try the release again; if it keeps failing, something pushes to the branch continuously."))
		}
	}
}

// editAndPush edits, commits and pushes plan; when someone else pushed
// first, it plans again from their commit and tries again, up to
// pushRetries times. It sets res.Commit (and res.Plan, to the plan
// pushed) and returns the plan, manifests and files pushed; res.Commit
// stays empty when nothing was left to release at the new head. Its
// errors are the job's end.
func (r *run) editAndPush(ctx context.Context, res *Result, lister *imageCache, plan *Plan, m *gitrepo.Manifests) (*Plan, *gitrepo.Manifests, map[string][]byte, error) {
	author := authorFor(r.spec, plan, m)
	for attempt := 1; ; attempt++ {
		files, err := r.edit(plan, m)
		if err != nil {
			return nil, nil, nil, r.fail(ctx, plan, "", err)
		}
		commit, err := r.commit(ctx, plan, m, files, author)
		if err == nil {
			if ctx.Err() != nil {
				return nil, nil, nil, r.e.dropLocalCommit(ctx, r.instance, r.spec, plan, r.start)
			}
			err = r.push(ctx, plan, commit)
		}
		if err == nil {
			res.Commit = commit
			return plan, m, files, nil
		}
		if !errors.Is(err, gitrepo.ErrMoved) || attempt == pushRetries {
			return nil, nil, nil, r.fail(ctx, plan, "", err)
		}
		now, m2, err := r.replan(ctx, lister, plan, attempt, err)
		if err != nil {
			return nil, nil, nil, r.fail(ctx, plan, "", err)
		}
		plan, m = now, m2
		res.Plan = plan
		if plan.Updates() == 0 {
			r.e.log.Info("the branch moved during an automated release, and nothing is left to release at the new head", "revision", plan.Revision)
			return plan, m, nil, nil
		}
	}
}

// edit records the workloads the plan applies and edits their files,
// refusing an edit the cluster would not apply.
func (r *run) edit(plan *Plan, m *gitrepo.Manifests) (map[string][]byte, error) {
	// Saved with the plan at StageCommitting, before the push: what
	// a take-over or a rollback applies.
	recordTargets(plan, m)
	r.report(Progress{Stage: StageEditing})
	files, err := r.e.edit(plan, m)
	if err != nil {
		return nil, err
	}
	if err := r.e.mayApply(plan, files, m); err != nil {
		return nil, err
	}
	return files, nil
}

// commit commits the edited files on the plan's revision, with the job's
// trailer, and returns the commit.
func (r *run) commit(ctx context.Context, plan *Plan, m *gitrepo.Manifests, files map[string][]byte, author gitrepo.Signature) (string, error) {
	r.report(Progress{Stage: StageCommitting, Plan: plan})
	msg := commitMessage(r.instance, r.spec, plan)
	if r.o.JobID != "" {
		msg += "\n" + JobTrailer(r.o.JobID) + "\n"
	}
	return r.e.commitChecked(ctx, plan.Revision, files, imageChanges(plan, m), msg, author)
}

// push pushes commit. A push whose outcome is unclear is looked for on
// the remote: one that landed is no error, and one refused because the
// branch moved is gitrepo.ErrMoved.
func (r *run) push(ctx context.Context, plan *Plan, commit string) error {
	r.report(Progress{Stage: StagePushing})
	err := r.e.repo.Push(ctx, commit)
	if err != nil && !errors.Is(err, gitrepo.ErrMoved) && !stopping(ctx) {
		// A timeout or cancel may strike after the remote took
		// the push: look before saying nothing was pushed.
		head, landed, lerr := r.e.pushLanded(ctx, commit, r.o.JobID)
		switch {
		case lerr != nil:
			return fmt.Errorf("%w; whether the push reached the remote cannot be told (%v): check the branch for a commit with %q before releasing again", err, lerr, JobTrailer(r.o.JobID))
		case landed:
			r.e.log.Warn("the push reported an error, but the remote has the commit: carrying on", "commit", commit, "error", err)
			err = nil
		case head != plan.Revision:
			// Refused because someone pushed first, in words the
			// remote chose ("failed to update ref", "stale info").
			err = fmt.Errorf("%w: the branch moved to %.12s during the push (%v)", gitrepo.ErrMoved, head, err)
		}
	}
	return err
}

// replan plans again from the new head after someone else pushed (moved,
// the push's error), keeping their commit. Locks, automation and filters
// are read there. A plan a person confirmed must come out the same (what
// they pushed touched nothing being released); otherwise nothing is
// pushed. An automated job's plan is fluxd's own: it goes on with the
// new one, which leaves out what no longer qualifies.
func (r *run) replan(ctx context.Context, lister *imageCache, plan *Plan, attempt int, moved error) (*Plan, *gitrepo.Manifests, error) {
	e := r.e
	e.log.Info("the branch moved during the release; planning again from the new head", "attempt", attempt, "error", moved)
	// Under the git lock: the registry reads are the ones this job
	// made before taking it (planLocked reads nothing more).
	var now *Plan
	var m *gitrepo.Manifests
	_, perr := e.fetch(ctx)
	if perr == nil {
		var retry bool
		now, m, retry, perr = e.planLocked(ctx, r.spec, lister)
		if perr == nil && retry {
			perr = errors.New("the new head needs registry reads this release had not made (try the release again)")
		}
	}
	if perr != nil {
		if by := e.movedBy(ctx, plan.Revision, e.lastRev, planFiles(plan)); by != "" {
			perr = fmt.Errorf("%w; changed by %s", perr, by)
		}
		return nil, nil, fmt.Errorf("the branch moved while fluxd pushed, and planning again from the new head fails: %w; nothing was pushed", perr)
	}
	if !r.spec.Automated && now.Checksum != plan.Checksum {
		return nil, nil, e.movedUnderPlan(ctx, plan, now)
	}
	return now, m, nil
}

// pushLanded tells, after a push that failed in a way that leaves its
// outcome unclear (a timeout, a cancel, a connection reset), whether the
// remote has commit anyway: its branch is at the commit, or a later one
// descends from a commit with the job's trailer that is this commit.
// It returns the remote's head too.
func (e *Engine) pushLanded(ctx context.Context, commit, jobID string) (string, bool, error) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// A server may still be applying a push its client gave up on: look
	// twice, a moment apart, before saying it did not land.
	var head string
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			select {
			case <-lctx.Done():
				return "", false, lctx.Err()
			case <-time.After(landedRecheck):
			}
		}
		var err error
		if head, err = e.fetch(lctx); err != nil {
			return "", false, err
		}
		if head == commit {
			return head, true, nil
		}
		if jobID != "" {
			found, err := e.repo.FindCommit(lctx, JobTrailer(jobID), 200)
			if err != nil {
				return "", false, err
			}
			if found == commit {
				return head, true, nil
			}
		}
	}
	return head, false, nil
}

// landedRecheck is how long pushLanded waits before looking again.
var landedRecheck = 2 * time.Second

// FindJobCommit returns the commit a job pushed, found by its trailer in
// the branch's recent history, or "" if it pushed none.
func (e *Engine) FindJobCommit(ctx context.Context, id string) (string, error) {
	if err := e.lockGit(ctx); err != nil {
		return "", err
	}
	defer e.unlockGit()
	if _, err := e.fetch(ctx); err != nil {
		return "", err
	}
	// A job's commit is among the last few unless much was pushed since:
	// look far back, it costs one walk of the history.
	return e.repo.FindCommit(ctx, JobTrailer(id), 2000)
}
