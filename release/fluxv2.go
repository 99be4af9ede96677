package release

import (
	"fmt"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/gitrepo/format/setters"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Releases of a Flux v2 ImagePolicy's service (NS:imagepolicy/NAME, see
// gitrepo.attachImageAutomation): its containers are the fields its
// $imagepolicy markers mark, in any file; its tag filter is the
// ImagePolicy's own. How those fields are edited, and which workloads
// their change moves (what plan, render check, apply, lock and scope
// cover), is package gitrepo/format/setters's, looked up like every
// format's through format.Of; what is here is planning: the filter, the
// author, the locks of what it moves, and leaving marked fields to
// their policies.

// DefinitionFilter is the tag filter for one container of def: the
// ImagePolicy's, read as Flux v2 reads it, on an ImagePolicy's service;
// the annotations' otherwise (ContainerFilter).
func DefinitionFilter(def *gitrepo.Definition, container string) (registry.Filter, error) {
	if p := def.ImagePolicy; p != nil {
		f, err := registry.ImagePolicyFilter(registry.ImagePolicy{
			SemverRange:  p.SemverRange,
			Alphabetical: p.Alphabetical,
			Numerical:    p.Numerical,
			Desc:         p.Order == "desc",
			Pattern:      p.Pattern,
			Extract:      p.Extract,
			Exclude:      p.Exclude,
		})
		if err != nil {
			return registry.Filter{}, fmt.Errorf("ImagePolicy %s (%s:%d): %w", p.NSName, p.File, p.Line, err)
		}
		return f, nil
	}
	return ContainerFilter(def.Annotations, container)
}

// updatesOf are item it's updates as the formats take them.
func updatesOf(it Item) []gitrepo.ImageUpdate {
	out := make([]gitrepo.ImageUpdate, 0, len(it.Updates))
	for _, u := range it.Updates {
		out = append(out, gitrepo.ImageUpdate{Container: u.Container, From: u.Current, To: u.Target})
	}
	return out
}

// definitionOf is service id's definition in m, or, where git does not
// define it, one naming it alone (its format as its kind reads), so
// that what its change moves is itself.
func definitionOf(m *gitrepo.Manifests, id platform.ID) *gitrepo.Definition {
	if def, ok := m.Workloads[id]; ok {
		return def
	}
	return &gitrepo.Definition{ID: id, Format: gitrepo.KindFormat(id.Kind)}
}

// applyTarget is a workload a release applies, from file.
type applyTarget struct {
	id   platform.ID
	file string
}

// applyTargets are what applying item it means: the workloads its
// format says its change moves (format.Handler.Moves): its own, or, for
// an ImagePolicy's service, the workloads whose marked fields it
// changes (the ImagePolicy itself is not applied: it is Flux v2's
// object, which the sync applies like any other).
func applyTargets(it Item, m *gitrepo.Manifests) []applyTarget {
	def := definitionOf(m, it.Service)
	var out []applyTarget
	for _, id := range format.Of(def).Moves(def, updatesOf(it), m) {
		file := it.File
		if id != it.Service {
			file = m.Workloads[id].File
		}
		out = append(out, applyTarget{id, file})
	}
	return out
}

// authorFor is the author of a release's commit: the user's, or, for an
// automated release of ImagePolicy services only, the git.commit.author
// their ImageUpdateAutomation names (as Flux v2 commits).
func authorFor(spec Spec, plan *Plan, m *gitrepo.Manifests) gitrepo.Signature {
	if spec.Automated {
		var author *gitrepo.Signature
		for _, it := range plan.Items {
			if it.Action != Update {
				continue
			}
			def, ok := m.Workloads[it.Service]
			if !ok || def.Author == nil || author != nil && *author != *def.Author {
				author = nil
				break
			}
			author = def.Author
		}
		if author != nil {
			return *author
		}
	}
	return authorOf(spec.User)
}

// SoleInstance is the instance that work nobody named an instance for
// (an automated service without fluxd.io/automated-by, a promotion) is
// done under: the one instance whose scope holds it, else def, when no
// instance or several do. The automator and the promotion controller
// decide with it alike.
func SoleInstance(instances map[string]*auth.Scope, holds func(*auth.Scope) bool, def string) string {
	found := ""
	for inst, sc := range instances {
		if !holds(sc) {
			continue
		}
		if found != "" {
			return def
		}
		found = inst
	}
	if found == "" {
		return def
	}
	return found
}

// InScope reports whether scope (nil: everything) holds service id,
// defined in git by def (nil when only in the cluster): its namespace and
// file, and what its format says a release of it touches: the places
// (format.Handler.Places: the namespaces a HelmRelease installs into,
// every field an ImagePolicy's service marks and its object's namespace)
// and every workload its release would apply (Moves). A policy in a
// tenant's namespace must not reach files or workloads outside it. The
// plan and the automator decide with it alike.
func InScope(scope *auth.Scope, id platform.ID, def *gitrepo.Definition, m *gitrepo.Manifests) bool {
	if scope == nil {
		return true
	}
	if def == nil {
		return scope.Contains(id.Namespace, "")
	}
	if !scope.Contains(id.Namespace, def.File) {
		return false
	}
	h := format.Of(def)
	for _, p := range h.Places(def) {
		if !scope.Contains(p.Namespace, p.File) {
			return false
		}
	}
	it := Item{Service: id}
	for _, c := range def.Containers {
		it.Updates = append(it.Updates, ContainerUpdate{Container: c.Name, Current: c.Image})
	}
	for _, w := range h.Moves(def, updatesOf(it), m) {
		file := def.File
		if w != id {
			file = m.Workloads[w].File
		}
		if !scope.Contains(w.Namespace, file) {
			return false
		}
	}
	return true
}

// lockedSetterWorkloads keeps a release off the workloads locked in git
// that its change moves besides its own (format.Handler.Moves; only an
// ImagePolicy's service moves others): a marked field is the workload's
// own image (or a kustomization's images: entry it is built from), so
// setting it moves the workload however its lock reads. As with a locked service, the
// policy's item is skipped (automated, or all services) or the release
// refused (the policy named), unless forced by name.
func lockedSetterWorkloads(spec Spec, plan *Plan, m *gitrepo.Manifests) error {
	if spec.Force && !spec.All && !spec.Automated {
		return nil
	}
	for i := range plan.Items {
		it := &plan.Items[i]
		def, ok := m.Workloads[it.Service]
		if it.Action != Update || !ok {
			continue
		}
		var locked []string
		for _, id := range format.Of(def).Moves(def, updatesOf(*it), m) {
			if id == it.Service {
				continue // (its own lock: the plan's, before this)
			}
			if w := m.Workloads[id]; w.Annotations[AnnotationLocked] == "true" {
				locked = append(locked, fmt.Sprintf("%s (%s)", id, LockReason(w.Annotations)))
			}
		}
		if len(locked) == 0 {
			continue
		}
		reason := "its fields would move " + strings.Join(locked, ", ")
		if !spec.All && !spec.Automated {
			return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%s: %s", it.Service, reason),
				"Unlock the workload (fluxctl unlock), or release the policy anyway with --force.")
		}
		it.Action, it.Reason, it.Updates = Skip, reason, nil
	}
	return nil
}

// leaveMarkedToPolicies keeps a workload's own automation (its annotation,
// Flux v1's or fluxd's) off the containers whose image field an automated
// ImagePolicy marks: the policy sets its pick, older or not, and fluxd's
// automation moves forward, so the two would undo each other at every
// pass, a commit and a rollout each time. The marker is the more specific
// of the two. A release by hand is not affected.
func leaveMarkedToPolicies(spec Spec, plan *Plan, m *gitrepo.Manifests) {
	if !spec.Automated {
		return
	}
	for i := range plan.Items {
		it := &plan.Items[i]
		def, ok := m.Workloads[it.Service]
		if it.Action != Update || !ok || def.Format == gitrepo.FormatSetters {
			continue
		}
		var kept []ContainerUpdate
		var left []string
		for _, u := range it.Updates {
			if p := markingPolicy(def, u.Container, m); p != "" {
				left = append(left, fmt.Sprintf("%s: its image field is marked with the ImagePolicy %s, which automates (or locks) it", u.Container, p))
				continue
			}
			kept = append(kept, u)
		}
		if len(left) == 0 {
			continue
		}
		it.Updates = kept
		if len(kept) == 0 {
			it.Action, it.Reason = Skip, strings.Join(left, "; ")
		}
	}
}

// markingPolicy is the ImagePolicy service, automated or locked, whose
// marked field holds the image of def's container, or "".
func markingPolicy(def *gitrepo.Definition, container string, m *gitrepo.Manifests) string {
	image := ""
	for _, c := range def.Containers {
		if c.Name == container {
			image = c.Image
		}
	}
	for _, pid := range sortedWorkloads(m) {
		p := m.Workloads[pid]
		if p.Format != gitrepo.FormatSetters || p.Annotations[AnnotationAutomated] != "true" && p.Annotations[AnnotationLocked] != "true" {
			continue // (a locked policy holds the field: not the workload's either)
		}
		for _, pc := range p.Containers {
			s, ok := setters.Of(p, pc.Name)
			if ok && setters.RunsField(image, pc.Image) && setters.MovesWorkload(s, def, gitrepo.ImageUpdate{Container: pc.Name, From: pc.Image}) {
				return pid.String()
			}
		}
	}
	return ""
}
