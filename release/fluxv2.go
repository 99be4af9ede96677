package release

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Releases of a Flux v2 ImagePolicy's service (NS:imagepolicy/NAME, see
// gitrepo.attachImageAutomation): its containers are the fields its
// $imagepolicy markers mark, in any file; its tag filter is the
// ImagePolicy's own. A release edits those fields (SetSetters), proves
// the commit with the render check, and applies the workloads whose
// marked fields changed; everything else it changed (a ConfigMap)
// reaches the cluster through the sync. A field in a plain file is a
// field change of its object (a List's item's own); a field in a file
// kustomizations build (Setter.Builds: a kustomization's images: entry
// or inline patch, a base's object) is a change of what each of those
// builds makes from it, the base's own and every overlay's, so that plan,
// render check, apply, lock and scope all cover the same workloads
// (setterChanges, setterWorkloads).

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

// setterOf is def's marked field named field.
func setterOf(def *gitrepo.Definition, field string) (gitrepo.Setter, bool) {
	for _, s := range def.Setters {
		if s.Field == field {
			return s, true
		}
	}
	return gitrepo.Setter{}, false
}

// editSetters edits the fields item it updates into files (read from the
// clone at dir when not there yet).
func editSetters(dir string, it *Item, def *gitrepo.Definition, files map[string][]byte) error {
	byFile := map[string][]gitrepo.SetterChange{}
	var order []string
	for _, u := range it.Updates {
		s, ok := setterOf(def, u.Container)
		if !ok {
			return fmt.Errorf("%s: the field %s is no longer marked with it in git", it.Service, u.Container)
		}
		from, err := s.ValueFor(u.Current)
		if err == nil && from != s.Value {
			err = &gitrepo.ConflictError{ID: it.Service, What: "field " + s.Field, Want: from, Got: s.Value}
		}
		if err != nil {
			return err
		}
		to, err := s.ValueFor(u.Target)
		if err != nil {
			return err
		}
		if from == to {
			continue // (a :name field beside a :tag one: the same name)
		}
		if _, ok := byFile[s.File]; !ok {
			order = append(order, s.File)
		}
		byFile[s.File] = append(byFile[s.File], gitrepo.SetterChange{Field: s.Field, From: from, To: to})
	}
	for _, file := range order {
		content, ok := files[file]
		if !ok {
			b, err := gitrepo.ReadFile(dir, file)
			if err != nil {
				return err
			}
			content = b
		}
		out, err := gitrepo.SetSetters(it.Service, file, content, byFile[file])
		if err != nil {
			return fmt.Errorf("editing %s in %s: %w", it.Service, file, err)
		}
		files[file] = out
	}
	return nil
}

// policyChanges are the render changes of an ImagePolicy service's
// updates, each once: fields beside one another (:name, :tag, :digest)
// move the same built container.
func policyChanges(id platform.ID, def *gitrepo.Definition, updates []ContainerUpdate, m *gitrepo.Manifests) []gitrepo.Change {
	var out []gitrepo.Change
	seen := map[string]bool{}
	for _, u := range updates {
		for _, c := range setterChanges(id, def, u, m) {
			if k := c.String() + "\x00" + c.Workload.String() + "\x00" + c.Container; !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// setterChanges are the render changes of an ImagePolicy service's
// update u: the marked field itself in a plain file (named by its
// object, a List's item's own), or, for a field in a file kustomizations
// build (a kustomization's images: entry or inline patch, a base's
// resource, the overlays built from it), the image of each container
// of what they build that the edit moves.
func setterChanges(id platform.ID, def *gitrepo.Definition, u ContainerUpdate, m *gitrepo.Manifests) []gitrepo.Change {
	s, ok := setterOf(def, u.Container)
	if !ok {
		return []gitrepo.Change{{Workload: id, Container: u.Container, From: u.Current, To: u.Target}}
	}
	from, _ := s.ValueFor(u.Current)
	to, _ := s.ValueFor(u.Target)
	if from == to {
		return nil
	}
	if len(s.Builds) > 0 && !byBuild(s) {
		// A field of an object in a base: that object as each build
		// makes it.
		var out []gitrepo.Change
		for _, k := range s.Builds {
			out = append(out, gitrepo.Change{File: k, Kind: s.ObjectKind, Name: s.ObjectName, Field: s.ObjectPath, From: from, To: to})
		}
		return out
	}
	if len(s.Builds) > 0 {
		var out []gitrepo.Change
		for _, wid := range sortedWorkloads(m) {
			w := m.Workloads[wid]
			if !w.Built || !slices.Contains(s.Builds, w.File) || wid.Kind == "imagepolicy" {
				continue // (a policy built there too: its containers are fields)
			}
			for _, c := range w.Containers {
				if target, ok := builtMove(c.Image, u); ok {
					out = append(out, gitrepo.Change{Workload: wid, Container: c.Name, From: c.Image, To: target})
				}
			}
		}
		return out
	}
	return []gitrepo.Change{{File: s.File, Line: s.ObjectLine, Field: s.ObjectPath, From: from, To: to}}
}

// byBuild says whether marked field s is one the build itself reads (a
// kustomization's images: entry or inline patch), rather than a field
// of an object it builds.
func byBuild(s gitrepo.Setter) bool {
	return s.Patch != nil || gitrepo.IsKustomization(s.File)
}

// builtMove says whether a built container running image is moved by
// update u of a marked field, and to what: it runs u's current image,
// or, where kustomize writes a digest in place of the tag (an images:
// entry's digest), the current image's repository@digest.
func builtMove(image string, u ContainerUpdate) (string, bool) {
	if image == u.Current {
		return u.Target, true
	}
	tgt, err := registry.ParseRef(u.Target)
	if err != nil || tgt.Digest == "" || !runsField(image, u.Current) {
		return "", false
	}
	return tgt.Repository + "@" + tgt.Digest, true
}

// runsField says whether a container running image runs what a marked
// field describes as current: that image, or its repository@digest.
func runsField(image, current string) bool {
	if image == current {
		return true
	}
	cur, err := registry.ParseRef(current)
	return err == nil && cur.Digest != "" && image == cur.Repository+"@"+cur.Digest
}

// setterWorkloads are the workloads an ImagePolicy service's release
// changes, to apply and follow: those whose object holds a marked field
// it updates, and those built (by a kustomization, or an overlay of it)
// from a file holding one, whose containers the field moves.
func setterWorkloads(it Item, def *gitrepo.Definition, m *gitrepo.Manifests) []platform.ID {
	seen := map[platform.ID]bool{}
	var out []platform.ID
	for _, u := range it.Updates {
		s, ok := setterOf(def, u.Container)
		if !ok {
			continue
		}
		for _, wid := range sortedWorkloads(m) {
			w := m.Workloads[wid]
			if seen[wid] || wid.Kind == "imagepolicy" {
				continue
			}
			if movesWorkload(s, w, u) {
				seen[wid] = true
				out = append(out, wid)
			}
		}
	}
	return out
}

// movesWorkload reports whether marked field s, updated by u, moves
// workload w: w's object holds it, or w is built from its file and runs
// the image it describes.
func movesWorkload(s gitrepo.Setter, w *gitrepo.Definition, u ContainerUpdate) bool {
	if len(s.Builds) > 0 {
		if !w.Built || !slices.Contains(s.Builds, w.File) {
			return false
		}
		if !byBuild(s) {
			// An object of a base: the workloads built from it (a
			// name prefix or suffix added).
			return strings.EqualFold(w.ID.Kind, s.ObjectKind) && strings.Contains(w.ID.Name, s.ObjectName)
		}
		for _, c := range w.Containers {
			if _, ok := builtMove(c.Image, u); ok {
				return true
			}
		}
		return false
	}
	return !w.Built && w.File == s.File && w.Line == s.ObjectLine
}

func runsImage(def *gitrepo.Definition, image string) bool {
	for _, c := range def.Containers {
		if c.Image == image {
			return true
		}
	}
	return false
}

// applyTarget is a workload a release applies, from file.
type applyTarget struct {
	id   platform.ID
	file string
}

// applyTargets are what applying item it means: its own workload, or,
// for an ImagePolicy's service, the workloads whose marked fields it
// changes (the ImagePolicy itself is not applied: it is Flux v2's
// object, which the sync applies like any other).
func applyTargets(it Item, m *gitrepo.Manifests) []applyTarget {
	def, ok := m.Workloads[it.Service]
	if !ok || def.ImagePolicy == nil {
		return []applyTarget{{it.Service, it.File}}
	}
	var out []applyTarget
	for _, id := range setterWorkloads(it, def, m) {
		out = append(out, applyTarget{id, m.Workloads[id].File})
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

// InScope reports whether scope (nil: everything) holds service id,
// defined in git by def (nil when only in the cluster): its namespace and
// file, the namespaces it installs into (installsInScope), and, for an
// ImagePolicy's service, every field it marks (setterScope). The plan and
// the automator decide with it alike.
func InScope(scope *auth.Scope, id platform.ID, def *gitrepo.Definition, m *gitrepo.Manifests) bool {
	if scope == nil {
		return true
	}
	if def == nil {
		return scope.Contains(id.Namespace, "")
	}
	return scope.Contains(id.Namespace, def.File) && installsInScope(scope, def) && setterScope(scope, id, def, m)
}

// installsInScope reports whether scope holds every namespace def
// installs into besides its own (a HelmRelease's targetNamespace), file
// being where git defines it.
func installsInScope(scope *auth.Scope, def *gitrepo.Definition) bool {
	for _, ns := range def.InstallsInto {
		if !scope.Contains(ns, def.File) {
			return false
		}
	}
	return true
}

// setterScope reports whether an ImagePolicy's service lies wholly in an
// instance's scope: every file holding one of its fields, the namespace
// of every object holding one, and every workload its release would
// apply. A policy in a tenant's namespace must
// not reach files or workloads outside it.
func setterScope(scope *auth.Scope, id platform.ID, def *gitrepo.Definition, m *gitrepo.Manifests) bool {
	if scope == nil || def.ImagePolicy == nil {
		return true
	}
	it := Item{Service: id}
	for _, c := range def.Containers {
		s, ok := setterOf(def, c.Name)
		if !ok || !scope.Contains(id.Namespace, s.File) {
			return false
		}
		// The object holding the field: a ConfigMap of another
		// namespace is that namespace's, though no workload applies it.
		if s.Namespace != "" && !scope.Contains(s.Namespace, s.File) {
			return false
		}
		it.Updates = append(it.Updates, ContainerUpdate{Container: c.Name, Current: c.Image})
	}
	for _, w := range setterWorkloads(it, def, m) {
		if !scope.Contains(w.Namespace, m.Workloads[w].File) {
			return false
		}
	}
	return true
}

// lockedSetterWorkloads keeps an ImagePolicy's release off workloads
// locked in git: a marked field is the workload's own image (or a
// kustomization's images: entry it is built from), so setting it moves
// the workload however its lock reads. As with a locked service, the
// policy's item is skipped (automated, or all services) or the release
// refused (the policy named), unless forced by name.
func lockedSetterWorkloads(spec Spec, plan *Plan, m *gitrepo.Manifests) error {
	if spec.Force && !spec.All && !spec.Automated {
		return nil
	}
	for i := range plan.Items {
		it := &plan.Items[i]
		def, ok := m.Workloads[it.Service]
		if it.Action != Update || !ok || def.ImagePolicy == nil {
			continue
		}
		var locked []string
		for _, id := range setterWorkloads(*it, def, m) {
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
		if it.Action != Update || !ok || def.ImagePolicy != nil {
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
		if p.ImagePolicy == nil || p.Annotations[AnnotationAutomated] != "true" && p.Annotations[AnnotationLocked] != "true" {
			continue // (a locked policy holds the field: not the workload's either)
		}
		for _, pc := range p.Containers {
			s, ok := setterOf(p, pc.Name)
			if ok && runsField(image, pc.Image) && movesWorkload(s, def, ContainerUpdate{Current: pc.Image}) {
				return pid.String()
			}
		}
	}
	return ""
}
