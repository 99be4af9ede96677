package release

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/platform"
)

// stillReleased checks, before a taken-over job applies and follows its
// release, that git still holds it: the job's commit is in the branch (a
// force-push did not take it away) and every planned container is at its
// target (nobody reverted it while fluxd restarted). A job whose release
// git no longer holds must not report success. m is the branch's
// workloads, just fetched; the caller holds the git lock, so the branch
// checked is the one applied (applyFromGit).
func (e *Engine) stillReleased(ctx context.Context, plan *Plan, commit, jobID string, m *gitrepo.Manifests) error {
	if jobID != "" {
		found, err := e.repo.FindCommit(ctx, JobTrailer(jobID), 2000)
		if err != nil {
			return fmt.Errorf("looking for the commit in the branch: %w", err)
		}
		if found != commit {
			return fmt.Errorf("the branch no longer has commit %.12s (it was force-pushed away while fluxd restarted), so the release is not in git; nothing was applied. Look at the branch's history, then release again if it is still wanted", commit)
		}
	}
	var moved []string
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		def, ok := m.Workloads[it.Service]
		if !ok {
			moved = append(moved, fmt.Sprintf("%s is no longer defined", it.Service))
			continue
		}
		for _, u := range it.Updates {
			for _, c := range def.Containers {
				if c.Name == u.Container && c.Image != u.Target {
					moved = append(moved, fmt.Sprintf("%s container %s is at %s, not %s", it.Service, c.Name, c.Image, u.Target))
				}
			}
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("git no longer holds the release (reverted or changed while fluxd restarted): %s; nothing was applied, and the sync applies git as it is", strings.Join(moved, "; "))
	}
	return nil
}

// A job remembers, from when it is planned, the workloads it applies: the
// objects rendered from git (by kind, namespace and name) that its edits
// change, whichever format holds the edited field. A take-over, a
// rollback, a cancel's revert and a failure's rollback apply exactly
// those, whatever git holds by then. Looking them up again in git does
// not work: a Flux v2 ImagePolicy's newTag in a kustomization is found
// through the workloads that run the plan's old image, which, once the
// release is pushed, none does, and the take-over applied nothing.

// Target is one workload a job applies.
type Target struct {
	// Workload is the rendered object's identity: its kind, namespace
	// and name, as the cluster knows it.
	Workload platform.ID
	// File is where it renders from when the job is planned: its
	// manifest, or the kustomization that builds it. At apply time the
	// file git defines it in then is read (it may have moved).
	File string
	// Format is how the release edits it: TargetPlain, TargetKustomize,
	// TargetMarked or TargetHelmValues.
	Format string
}

// The formats a Target is edited in.
const (
	// TargetPlain: a workload's own manifest, its container image.
	TargetPlain = "plain"
	// TargetKustomize: a workload a kustomization builds, its images:
	// entry.
	TargetKustomize = "kustomize"
	// TargetMarked: a workload holding (or built from) a field a Flux v2
	// $imagepolicy marker marks.
	TargetMarked = "marked field"
	// TargetHelmValues: a HelmRelease, its values.
	TargetHelmValues = "helm values"
)

func (t Target) String() string {
	return fmt.Sprintf("%s (%s, %s)", t.Workload, t.Format, t.File)
}

// recordTargets records, in each updating item of plan, the workloads
// applying it means against m, the manifests plan was made from, and
// marks plan Targeted. Items are copied first: plan's items may be shared
// with remembered plans.
func recordTargets(plan *Plan, m *gitrepo.Manifests) {
	plan.Items = slices.Clone(plan.Items)
	for i := range plan.Items {
		it := &plan.Items[i]
		it.Targets = nil
		if it.Action != Update {
			continue
		}
		f := format.Of(definitionOf(m, it.Service)).Format()
		for _, t := range applyTargets(*it, m) {
			it.Targets = append(it.Targets, Target{Workload: t.id, File: t.file, Format: targetFormats[f]})
		}
	}
	plan.Targeted = true
}

// targetFormats name, in a Target, the format of the item whose release
// applies it: a target of an ImagePolicy's service is a marked field's,
// any other item's target is its own workload.
var targetFormats = map[gitrepo.Format]string{
	gitrepo.FormatPlain:     TargetPlain,
	gitrepo.FormatKustomize: TargetKustomize,
	gitrepo.FormatSetters:   TargetMarked,
	gitrepo.FormatHelm:      TargetHelmValues,
}

// targetsOf are the workloads applying item it means, and the files to
// render them from in m: its recorded Targets; or, for a plan saved by an
// older fluxd without them, legacyTargets. A recorded workload git no
// longer defines is an error: applying less than was planned is not the
// release.
func targetsOf(plan *Plan, it Item, m *gitrepo.Manifests) ([]applyTarget, error) {
	if !plan.Targeted {
		return legacyTargets(it, m), nil
	}
	out := make([]applyTarget, 0, len(it.Targets))
	for _, t := range it.Targets {
		def, ok := m.Workloads[t.Workload]
		if !ok {
			return nil, fmt.Errorf("%s, which the job applies for %s, is no longer defined in git", t.Workload, it.Service)
		}
		out = append(out, applyTarget{t.Workload, def.File})
	}
	return out, nil
}

// legacyTargets looks up, in git as m holds it, the workloads applying
// item it means, for a plan that did not record them (saved by an older
// fluxd): as that fluxd did (applyTargets, by the item's current images),
// and by its target images too, since git holds the release (or, for a
// revert, the image before it) once it is pushed.
func legacyTargets(it Item, m *gitrepo.Manifests) []applyTarget {
	out := applyTargets(it, m)
	swapped := it
	swapped.Updates = nil
	for _, u := range it.Updates {
		swapped.Updates = append(swapped.Updates, ContainerUpdate{Container: u.Container, Current: u.Target, Target: u.Current})
	}
	for _, t := range applyTargets(swapped, m) {
		if !slices.ContainsFunc(out, func(o applyTarget) bool { return o.id == t.id }) {
			out = append(out, t)
		}
	}
	return out
}

// warnLegacy says, once per take-over or rollback, that plan was saved
// without its targets.
func (e *Engine) warnLegacy(plan *Plan, what string) {
	if !plan.Targeted {
		e.log.Warn("this job was saved by an older fluxd, which did not record the workloads it applies: "+what+" looks them up in git as it is now, by the plan's images (a release none of whose workloads is found fails rather than succeed having applied nothing)", "revision", plan.Revision)
	}
}
