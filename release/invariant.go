package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/gitrepo/format/kustomize"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// What every commit fluxd pushes promises: it is exactly what was planned,
// against what git holds at that moment. Three rules keep it, in one place
// each:
//
//   - every edit names the value it replaces (gitrepo.SetImages, and
//     edit's check of a kustomization's current images): git holding
//     another value refuses the edit;
//   - after the branch moves under a push, the release plans again from
//     the new head (pushAndApply); a plan a person confirmed must come
//     out the same, or the job fails with nothing pushed, naming the
//     commits that changed it;
//   - commitChecked renders every workload at the parent commit and at
//     the new one and refuses the commit unless the difference is exactly
//     the planned changes (gitrepo.CheckRender). Every path that commits
//     (releases, automated releases, rollbacks, policy changes) commits
//     through it.
//
// And what every job that ends "succeeded" promises: it applied the
// workloads its plan recorded when it was planned (Item.Targets), and
// followed their rollouts when it follows rollouts; it never succeeds
// having applied nothing, unless there was nothing to apply, and then it
// says so. mayEndSucceeded checks it, in finish, where every release
// (Execute's or a take-over's) ends succeeded; a rollback is held to it
// before it says it rolled out.

// commitChecked commits files on top of base (which the clone holds) once
// gitrepo.CheckRender has found that they change exactly changes.
func (e *Engine) commitChecked(ctx context.Context, base string, files map[string][]byte, changes []gitrepo.Change, msg string, author gitrepo.Signature) (string, error) {
	if err := e.checkRender(files, changes); err != nil {
		return "", err
	}
	return e.repo.Commit(ctx, base, files, msg, author)
}

// checkRender renders the manifest paths as the clone holds them and with
// files in place, and compares.
func (e *Engine) checkRender(files map[string][]byte, changes []gitrepo.Change) error {
	dirs, err := gitrepo.ResolvePaths(e.repo.Dir(), e.repo.Paths())
	if err != nil {
		return fluxerr.New(fluxerr.User, err, "")
	}
	before, after, err := gitrepo.Render(e.repo.Dir(), dirs, files)
	if err != nil {
		return err
	}
	if err := gitrepo.CheckRender(before, after, changes); err != nil {
		e.log.Warn("refused a commit whose render differs from its plan", "error", err)
		return fluxerr.New(fluxerr.Precondition, err,
			"Nothing was pushed. The edit would have moved workloads the plan does not name (a kustomize images: entry or a YAML anchor they share), or git changed under the plan. Look at the plan again (release --dry-run); release the workloads named together, or give them images of their own.")
	}
	return nil
}

// imageChanges are a plan's updates as render changes.
func imageChanges(plan *Plan, m *gitrepo.Manifests) []gitrepo.Change {
	var out []gitrepo.Change
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		def := definitionOf(m, it.Service)
		out = append(out, format.Of(def).Changes(def, updatesOf(it), m)...)
	}
	return out
}

// movedBy names the commits after from up to to that changed files (all
// of them when none did, or files is empty): who changed what under a
// plan.
func (e *Engine) movedBy(ctx context.Context, from, to string, files []string) string {
	lister, ok := e.repo.(interface {
		Commits(ctx context.Context, from, to string) ([]gitrepo.CommitInfo, error)
	})
	if !ok || from == "" || to == "" || from == to {
		return ""
	}
	cs, err := lister.Commits(ctx, from, to)
	if err != nil {
		return ""
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f] = true
	}
	var named []string
	for _, c := range cs {
		hit := len(want) == 0
		for _, f := range c.Files {
			if want[f] {
				hit = true
			}
		}
		if hit {
			named = append(named, c.String())
		}
	}
	if len(named) == 0 {
		// None touched the files edited (a kustomization's base, say):
		// name the commits the branch moved by.
		for i, c := range cs {
			if i == 5 {
				named = append(named, fmt.Sprintf("and %d more", len(cs)-5))
				break
			}
			named = append(named, c.String())
		}
	}
	return strings.Join(named, "; ")
}

// planFiles are the files a plan edits.
func planFiles(plan *Plan) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range plan.Items {
		if it.Action == Update && it.File != "" && !seen[it.File] {
			seen[it.File] = true
			out = append(out, it.File)
		}
	}
	sort.Strings(out)
	return out
}

// movedUnderPlan is the error of a release whose plan changed while it
// pushed: the branch moved to rev, and planning again from there gives
// now instead of plan.
func (e *Engine) movedUnderPlan(ctx context.Context, plan, now *Plan) error {
	what := e.WhatChanged(plan.Checksum, now)
	files := append(planFiles(plan), planFiles(now)...)
	if by := e.movedBy(ctx, plan.Revision, now.Revision, files); by != "" {
		what += "; changed by " + by
	}
	return fluxerr.New(fluxerr.Precondition,
		fmt.Errorf("the branch moved while fluxd pushed, and the plan made again from the new head (%.12s) differs from the one being released: %s; nothing was pushed", now.Revision, what),
		"Someone changed the workloads being released (a hotfix, a lock) just before fluxd's push, and fluxd never overwrites that. Look at the new plan (release --dry-run) and release again if it is still wanted.")
}

// kustomizeSiblings makes the plan honest about kustomizations: a release
// of a workload a kustomization builds writes an images: entry that every
// workload of that build running the same repository shares, so each of
// those moves with it. Unless every one of them is updated to the same
// image by this very plan, the release of that workload is refused: a
// Precondition error when services were named, else the item is skipped
// with a reason naming the siblings (locked ones said so). It repeats
// until nothing more is skipped.
func kustomizeSiblings(spec Spec, plan *Plan, m *gitrepo.Manifests) error {
	builds := kustomize.Builds(m)
	for changed := true; changed; {
		changed = false
		targets := map[platform.ID]map[string]string{} // service → repo → target
		for _, it := range plan.Items {
			if it.Action != Update {
				continue
			}
			targets[it.Service] = map[string]string{}
			for _, u := range it.Updates {
				targets[it.Service][kustomize.Repository(u.Current)] = u.Target
			}
		}
		for i := range plan.Items {
			it := &plan.Items[i]
			def, ok := m.Workloads[it.Service]
			if it.Action != Update || !ok || def.Format != gitrepo.FormatKustomize {
				// (An ImagePolicy's service sets the fields it marks,
				// moving what they build, as in Flux v2; it is built only
				// because its objects sit in the kustomization's
				// directory. Locked workloads: lockedSetterWorkloads.)
				continue
			}
			var blocking []string
			outside := 0 // siblings outside the caller's scope: counted, not named
			for _, u := range it.Updates {
				repo := kustomize.Repository(u.Current)
				for _, id := range kustomize.Sharing(def, repo, builds, m) {
					sib := m.Workloads[id]
					if targets[id][repo] == u.Target {
						continue // released together, to the same image
					}
					if spec.Scope != nil && !spec.Scope.Contains(id.Namespace, sib.File) {
						outside++
						continue
					}
					name := id.String()
					if sib.Annotations[AnnotationLocked] == "true" {
						name += " (" + LockReason(sib.Annotations) + ")"
					}
					blocking = append(blocking, name)
				}
			}
			if len(blocking) == 0 && outside == 0 {
				continue
			}
			blocking = dedupe(blocking)
			if outside > 0 {
				blocking = append(blocking, "a service outside your instance's scope")
			}
			reason := fmt.Sprintf("built by %s, whose images: entry it shares with %s: releasing it alone would move them too", def.File, strings.Join(blocking, ", "))
			if !spec.All && !spec.Automated {
				return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%s is %s", it.Service, reason),
					"Release them together (name every one of them, with the same image), or move the workload into a kustomization of its own. Nothing was changed.")
			}
			it.Action, it.Reason, it.Updates = Skip, reason, nil
			changed = true
		}
	}
	return nil
}

func sortedWorkloads(m *gitrepo.Manifests) []platform.ID {
	ids := make([]platform.ID, 0, len(m.Workloads))
	for id := range m.Workloads {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, platform.ID.Compare)
	return ids
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// What a job that succeeded having applied nothing says.
const (
	// NothingToApply: its plan changed nothing.
	NothingToApply = "nothing to apply: the plan was empty"
	// NothingToApplyNoWorkload: its plan changed fields of objects no
	// release applies (a ConfigMap's tag an ImagePolicy marks): they
	// reach the cluster through the sync.
	NothingToApplyNoWorkload = "nothing to apply: the plan changes no workload, only objects the sync applies (such as a ConfigMap's marked field)"
)

// mayEndSucceeded is the rule of a job's end: a release whose plan
// changes something may end succeeded only when gens (the generations
// applied, which the rollout follows) holds every workload the plan
// recorded, or, for a plan saved by an older fluxd that recorded none
// (Plan.Targeted unset), at least one. It returns the note a job that
// applied nothing for a reason says (NothingToApply...), or the error it
// fails with.
func mayEndSucceeded(plan *Plan, gens map[platform.ID]int64) (string, error) {
	if plan == nil || plan.Updates() == 0 {
		return NothingToApply, nil
	}
	if !plan.Targeted {
		if len(gens) == 0 {
			return "", fluxerr.New(fluxerr.Precondition,
				errors.New("applied nothing: this job was saved by an older fluxd, which did not record the workloads it applies, and none of them was found in git by the plan's images"),
				"The commit is in git; nothing of it was applied by this job. Apply it with the sync (fluxctl sync, with --sync-interval), or release the services again.")
		}
		return "", nil
	}
	var missed, want []string
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		for _, t := range it.Targets {
			want = append(want, t.Workload.String())
			if _, ok := gens[t.Workload]; !ok {
				missed = append(missed, t.Workload.String())
			}
		}
	}
	if len(want) == 0 {
		return NothingToApplyNoWorkload, nil
	}
	if len(missed) > 0 {
		return "", fmt.Errorf("the job did not apply %s, which its plan recorded that it applies; it does not report success having applied less than it planned", strings.Join(dedupe(missed), ", "))
	}
	return "", nil
}
