package release

import (
	"context"
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/platform"
)

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
