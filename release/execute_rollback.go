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
