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

// goneAfter is how long a followed workload may be absent from the
// cluster (longer than the informers take to see a new one) before it
// counts as deleted while it rolled out.
var goneAfter = 15 * time.Second

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
	ev := event(r.instance, r.spec, plan, r.typ, r.start)
	ev.Commit = res.Commit
	// An automated batch is one commit, but each service gets a history
	// row of its own, naming the images that triggered its release.
	evs := []history.Event{ev}
	if r.typ == history.AutomatedRelease && len(ev.Services) > 1 {
		evs = perService(ev, r.spec, plan)
	}
	if res.NotRolledOut != "" {
		notRolledOutRows(evs, unrolled, res.NotRolledOut)
	}
	for _, ev := range evs {
		if _, err := e.recorder.Record(ctx, ev); err != nil {
			e.log.Error("recording the release in history failed", "error", err, "commit", res.Commit)
		}
	}
	if res.NotRolledOut != "" {
		r.report(Progress{Stage: StageNotRolledOut, Commit: res.Commit})
		return res, nil
	}
	r.report(Progress{Stage: StageDone, Commit: res.Commit, Note: note})
	return res, nil
}

// failAndRollBack ends a pushed release whose rollout failed or was
// cancelled: it rolls the release back when asked (a cancel always asks),
// and records the failure. A rollback survives the user's cancel but not
// fluxd's stop: then nothing more is recorded, and the job, left at
// "rolling back", is finished by the next fluxd (Resume with RollingBack).
func (r *run) failAndRollBack(ctx context.Context, plan *Plan, commit string, err error) error {
	cancelled := userCancelled(ctx)
	if r.o.RollbackOnFailure || cancelled || r.o.RollingBack {
		dctx, stop := detach(ctx)
		rctx, cancel := context.WithTimeout(dctx, r.o.RolloutTimeout+time.Minute)
		revert, rerr := r.rollback(rctx, plan, commit, err)
		cancel()
		stop()
		switch {
		case rerr != nil && stopping(ctx):
			return r.e.interrupted(r.instance, commit, fmt.Errorf("%w; stopped while rolling back: %v", err, rerr))
		case rerr != nil:
			err = fmt.Errorf("%w; and the rollback failed too: %v", err, rerr)
		case revert == "":
			err = fmt.Errorf("%w; rolled back (git already had the revert), and the rollback rolled out", err)
		default:
			err = fmt.Errorf("%w; rolled back in commit %.12s, and the rollback rolled out", err, revert)
		}
	}
	typ := history.Failed
	if cancelled {
		typ = history.Cancelled
	}
	return r.e.failAs(context.WithoutCancel(ctx), typ, r.instance, r.spec, plan, r.start, commit, err)
}

// notRolledOutRows appends note to the rows that name a service nothing
// reported on: in a batch, those services' own rows (a Deployment that
// rolled out beside them does not say it was not), else every row (the
// one row of a release; a batch whose unreported workload is no service
// of its own, such as a HelmRelease an ImagePolicy's marker sets).
func notRolledOutRows(evs []history.Event, unrolled []platform.ID, note string) {
	var rows []int
	for i := range evs {
		if len(evs) > 1 && namesAny(evs[i].Services, unrolled) {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		for i := range evs {
			rows = append(rows, i)
		}
	}
	for _, i := range rows {
		evs[i].Message += "; " + note
	}
}

// namesAny reports whether services (IDs as history keeps them) holds
// one of ids.
func namesAny(services []string, ids []platform.ID) bool {
	for _, id := range ids {
		for _, s := range services {
			if s == id.String() {
				return true
			}
		}
	}
	return false
}

// perService splits an event into one per service, each with its own
// changes.
func perService(ev history.Event, spec Spec, plan *Plan) []history.Event {
	var out []history.Event
	for _, svc := range ev.Services {
		one := ev
		one.Services, one.Changes = []string{svc}, nil
		for _, it := range plan.Items {
			if it.Service.String() == svc && spec.Automated {
				one.Message = AutomatedMessage([]Item{it})
			}
		}
		for _, c := range ev.Changes {
			if c.Service == svc {
				one.Changes = append(one.Changes, c)
			}
		}
		out = append(out, one)
	}
	return out
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

// applyFromGit applies the plan's updated workloads as the branch has them,
// once check (if not nil) passes on the same fetch, under the same lock.
func (e *Engine) applyFromGit(ctx context.Context, plan *Plan, check func(*gitrepo.Manifests) error) (map[platform.ID]int64, error) {
	if err := e.lockDeploy(ctx); err != nil {
		return nil, err
	}
	defer e.unlockDeploy()
	_, m, err := e.manifests(ctx)
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(m); err != nil {
			return nil, err
		}
	}
	gens := map[platform.ID]int64{}
	var failed applyError
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		def, ok := m.Workloads[it.Service]
		if !ok {
			return nil, fmt.Errorf("%s is no longer defined in git", it.Service)
		}
		it.File = def.File
		targets, err := targetsOf(plan, it, m)
		if err != nil {
			return nil, err
		}
		for _, t := range targets {
			content, err := gitrepo.ReadFile(e.repo.Dir(), t.file)
			if err != nil {
				return nil, err
			}
			doc, err := e.workloadDoc(t.file, content, t.id)
			if err != nil {
				return nil, err
			}
			gen, err := e.cluster.Apply(context.WithoutCancel(ctx), t.id, doc)
			if err != nil {
				// The others are still applied and followed (as Execute
				// does).
				failed.add(t.id, err)
				continue
			}
			gens[t.id] = gen
		}
	}
	if failed.errs != nil {
		return gens, &failed
	}
	return gens, nil
}

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

// apply applies the plan's updated workloads as pushed in commit (files
// holds the edited ones). A workload that fails to apply leaves the
// others applied and followed: the error is then an *applyError.
func (r *run) apply(ctx context.Context, plan *Plan, files map[string][]byte, m *gitrepo.Manifests, commit string) (map[platform.ID]int64, error) {
	e := r.e
	gens := map[platform.ID]int64{}
	var failed applyError
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		targets, err := targetsOf(plan, it, m)
		if err != nil {
			failed.add(it.Service, err)
			continue
		}
		for _, t := range targets {
			doc, err := e.workloadDoc(t.file, files[t.file], t.id)
			var gen int64
			if err == nil {
				// Once pushed, the apply finishes even if the job is
				// cancelled: a cancel then rolls back, during the rollout.
				gen, err = e.cluster.Apply(context.WithoutCancel(ctx), t.id, doc)
			}
			if err != nil {
				// The others are still applied and followed, and the
				// release fails as a whole (rolled back when asked).
				failed.add(t.id, err)
				continue
			}
			gens[t.id] = gen
			e.log.Info("applied", "service", t.id.String(), "commit", commit, "generation", gen)
		}
	}
	if failed.errs != nil {
		failed.commit = commit
		return gens, &failed
	}
	return gens, nil
}

// mayApply refuses, before the commit, a release whose edited workloads
// the cluster would refuse to apply: otherwise the commit would be pushed
// and its apply fail, half done.
func (e *Engine) mayApply(plan *Plan, files map[string][]byte, m *gitrepo.Manifests) error {
	c, ok := e.cluster.(applyChecker)
	if !ok {
		return nil
	}
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		targets, err := targetsOf(plan, it, m)
		if err != nil {
			return fmt.Errorf("nothing was committed: %w", err)
		}
		for _, t := range targets {
			doc, err := e.workloadDoc(t.file, files[t.file], t.id)
			if err == nil {
				err = c.MayApply(t.id, doc)
			}
			if err != nil {
				return fmt.Errorf("nothing was committed: %w", err)
			}
		}
	}
	return nil
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

// rollback reverts a pushed release: it sets every updated container back
// to its previous image in a new commit on top of the current revision,
// pushes it, applies it and follows its rollout. It returns the commit.
func (r *run) rollback(ctx context.Context, plan *Plan, commit string, cause error) (string, error) {
	e := r.e
	r.report(Progress{Stage: StageRollingBack, Commit: commit})
	e.log.Warn("rolling back", "commit", commit, "cause", cause)
	// The revert applies the workloads the release recorded (Targets,
	// copied with each item), whatever git holds now.
	back := &Plan{Targeted: plan.Targeted}
	e.warnLegacy(plan, "the rollback")
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		rev := it
		rev.Updates = nil
		for _, u := range it.Updates {
			rev.Updates = append(rev.Updates, ContainerUpdate{Container: u.Container, Current: u.Target, Target: u.Current})
		}
		back.Items = append(back.Items, rev)
	}
	msg := fmt.Sprintf("Revert release %.12s in %s\n\n%v\n", commit, r.instance, cause)
	revert, gens, err := r.pushRevert(ctx, back, msg)
	if err == nil {
		// A rollback that applied nothing does not say it rolled out.
		_, err = mayEndSucceeded(back, gens)
	}
	if err != nil {
		return revert, err
	}
	if revert != "" {
		ev := event(r.instance, r.spec, back, history.Rollback, time.Now())
		ev.Commit, ev.Message = revert, fmt.Sprintf("rollback of %.12s: %v", commit, cause)
		if _, err := e.recorder.Record(context.WithoutCancel(ctx), ev); err != nil {
			e.log.Error("recording the rollback in history failed", "error", err)
		}
	}
	// The rollback's rollout has a timeout of its own, from now.
	o := r.o
	o.Checksum, o.RolloutStarted = "", time.Time{}
	return revert, r.follow(ctx, gens, o, StageRollingBack, commit)
}

// pushRevert commits, pushes and applies the revert plan back, holding
// the git lock.
func (r *run) pushRevert(ctx context.Context, back *Plan, msg string) (string, map[platform.ID]int64, error) {
	e := r.e
	if err := e.lockDeploy(ctx); err != nil {
		return "", nil, err
	}
	defer e.unlockDeploy()
	var files map[string][]byte
	var revert string
	var m *gitrepo.Manifests
	for attempt := 1; ; attempt++ {
		rev, read, err := e.manifests(ctx)
		if err != nil {
			return "", nil, err
		}
		m = read
		back.Revision = rev
		todo := stillToRevert(back, m)
		if todo.Updates() == 0 {
			// git has the revert already (a fluxd that stopped while it
			// rolled back had pushed it): apply and follow it, no commit.
			revert, files = "", nil
			break
		}
		// A container git holds at a third image (a person's fix since
		// the release) refuses the edit: a rollback overwrites nothing.
		if files, err = e.edit(todo, m); err != nil {
			return "", nil, err
		}
		if revert, err = e.commitChecked(ctx, rev, files, imageChanges(todo, m), msg, authorOf(r.spec.User)); err == nil {
			err = e.repo.Push(ctx, revert)
		}
		if err == nil {
			e.pushed(revert)
			break
		}
		if !errors.Is(err, gitrepo.ErrMoved) || attempt == pushRetries {
			return "", nil, err
		}
	}
	gens := map[platform.ID]int64{}
	for _, it := range back.Items {
		targets, err := targetsOf(back, it, m)
		if err != nil {
			return revert, nil, err
		}
		for _, t := range targets {
			content, ok := files[t.file]
			if !ok {
				var err error
				if content, err = gitrepo.ReadFile(e.repo.Dir(), t.file); err != nil {
					return revert, nil, err
				}
			}
			doc, err := e.workloadDoc(t.file, content, t.id)
			if err != nil {
				return revert, nil, err
			}
			if gens[t.id], err = e.cluster.Apply(context.WithoutCancel(ctx), t.id, doc); err != nil {
				return revert, nil, err
			}
		}
	}
	return revert, gens, nil
}

// stillToRevert is the revert plan back without the containers git
// already holds at their image from before the release.
func stillToRevert(back *Plan, m *gitrepo.Manifests) *Plan {
	todo := &Plan{Revision: back.Revision}
	for _, it := range back.Items {
		def, ok := m.Workloads[it.Service]
		left := it
		left.Updates = nil
		for _, u := range it.Updates {
			done := false
			if ok {
				for _, c := range def.Containers {
					if c.Name == u.Container && c.Image == u.Target {
						done = true
					}
				}
			}
			if !done {
				left.Updates = append(left.Updates, u)
			}
		}
		if len(left.Updates) > 0 {
			todo.Items = append(todo.Items, left)
		}
	}
	return todo
}
