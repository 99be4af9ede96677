// Package setters is the format of a Flux v2 ImagePolicy's service
// (gitrepo.FormatSetters, NS:imagepolicy/NAME): its containers are the
// fields its $imagepolicy markers mark, in any file (gitrepo's
// setters.go reads them, as image-automation-controller's setters do,
// and attachImageAutomation hangs them on the policy). A release edits
// those fields (gitrepo.SetSetters, byte for byte, compare-and-swap);
// the workloads whose marked fields changed are what it applies, follows,
// locks and scopes; everything else it changed (a ConfigMap) reaches the
// cluster through the sync.
//
// A field in a plain file is a field change of its object (a List's
// item's own). A field in a file kustomizations build (Setter.Builds: a
// kustomization's images: entry or inline patch, a base's object) is a
// change of what each of those builds makes from it, the base's own and
// every overlay's, so that plan, render check, apply, lock and scope all
// cover the same workloads.
package setters

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format/plain"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Format is gitrepo.FormatSetters's handler.
type Format struct{}

// Format implements format.Handler.
func (Format) Format() gitrepo.Format { return gitrepo.FormatSetters }

// Of is def's marked field named field.
func Of(def *gitrepo.Definition, field string) (gitrepo.Setter, bool) {
	for _, s := range def.Setters {
		if s.Field == field {
			return s, true
		}
	}
	return gitrepo.Setter{}, false
}

// Edit edits the fields updates set, each checked against the value git
// holds (a *gitrepo.ConflictError where it holds another).
func (Format) Edit(root string, def *gitrepo.Definition, updates []gitrepo.ImageUpdate, files map[string][]byte) error {
	byFile := map[string][]gitrepo.SetterChange{}
	var order []string
	for _, u := range updates {
		s, ok := Of(def, u.Container)
		if !ok {
			return fmt.Errorf("%s: the field %s is no longer marked with it in git", def.ID, u.Container)
		}
		from, err := s.ValueFor(u.From)
		if err == nil && from != s.Value {
			err = &gitrepo.ConflictError{ID: def.ID, What: "field " + s.Field, Want: from, Got: s.Value}
		}
		if err != nil {
			return err
		}
		to, err := s.ValueFor(u.To)
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
		content, err := plain.Content(root, file, files)
		if err != nil {
			return err
		}
		out, err := gitrepo.SetSetters(def.ID, file, content, byFile[file])
		if err != nil {
			return fmt.Errorf("editing %s in %s: %w", def.ID, file, err)
		}
		files[file] = out
	}
	return nil
}

// Changes are the render changes of updates, each once: fields beside
// one another (:name, :tag, :digest) move the same built container.
func (Format) Changes(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, m *gitrepo.Manifests) []gitrepo.Change {
	var out []gitrepo.Change
	seen := map[string]bool{}
	for _, u := range updates {
		for _, c := range changes(def, u, m) {
			if k := c.String() + "\x00" + c.Workload.String() + "\x00" + c.Container; !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// changes are the render changes of update u: the marked field itself
// in a plain file (named by its object, a List's item's own), or, for a
// field in a file kustomizations build (a kustomization's images: entry
// or inline patch, a base's resource, the overlays built from it), the
// image of each container of what they build that the edit moves.
func changes(def *gitrepo.Definition, u gitrepo.ImageUpdate, m *gitrepo.Manifests) []gitrepo.Change {
	s, ok := Of(def, u.Container)
	if !ok {
		return []gitrepo.Change{{Workload: def.ID, Container: u.Container, From: u.From, To: u.To}}
	}
	from, _ := s.ValueFor(u.From)
	to, _ := s.ValueFor(u.To)
	if from == to {
		return nil
	}
	if len(s.Builds) > 0 && !byBuild(s) {
		// A field of an object in a base: that object as each build
		// makes it, under the names the build gives it.
		var out []gitrepo.Change
		for _, k := range s.Builds {
			names, exact := s.BuiltNames(k)
			if !exact {
				names = []string{s.ObjectName}
			}
			for _, name := range names {
				out = append(out, gitrepo.Change{File: k, Kind: s.ObjectKind, Name: name, ExactName: exact, Field: s.ObjectPath, From: from, To: to})
			}
		}
		return out
	}
	if len(s.Builds) > 0 {
		var out []gitrepo.Change
		for _, wid := range sortedWorkloads(m) {
			w := m.Workloads[wid]
			if !w.Built || !slices.Contains(s.Builds, w.File) || w.Format == gitrepo.FormatSetters {
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
func builtMove(image string, u gitrepo.ImageUpdate) (string, bool) {
	if image == u.From {
		return u.To, true
	}
	tgt, err := registry.ParseRef(u.To)
	if err != nil || tgt.Digest == "" || !RunsField(image, u.From) {
		return "", false
	}
	return tgt.Repository + "@" + tgt.Digest, true
}

// RunsField says whether a container running image runs what a marked
// field describes as current: that image, or its repository@digest.
func RunsField(image, current string) bool {
	if image == current {
		return true
	}
	cur, err := registry.ParseRef(current)
	return err == nil && cur.Digest != "" && image == cur.Repository+"@"+cur.Digest
}

// Moves are the workloads updates change, to apply and follow: those
// whose object holds a marked field it updates, and those built (by a
// kustomization, or an overlay of it) from a file holding one, whose
// containers the field moves. The ImagePolicy itself is not one: it is
// Flux v2's object, which the sync applies like any other.
func (Format) Moves(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, m *gitrepo.Manifests) []platform.ID {
	seen := map[platform.ID]bool{}
	var out []platform.ID
	for _, u := range updates {
		s, ok := Of(def, u.Container)
		if !ok {
			continue
		}
		for _, wid := range sortedWorkloads(m) {
			w := m.Workloads[wid]
			if seen[wid] || w.Format == gitrepo.FormatSetters {
				continue
			}
			if MovesWorkload(s, w, u) {
				seen[wid] = true
				out = append(out, wid)
			}
		}
	}
	return out
}

// MovesWorkload reports whether marked field s, updated by u, moves
// workload w: w's object holds it, or w is built from its file and runs
// the image it describes.
func MovesWorkload(s gitrepo.Setter, w *gitrepo.Definition, u gitrepo.ImageUpdate) bool {
	if len(s.Builds) > 0 {
		if !w.Built || !slices.Contains(s.Builds, w.File) {
			return false
		}
		if !byBuild(s) {
			// An object of a base: the workloads built from it, named
			// as the build names it (its kustomizations' namePrefix
			// and nameSuffix).
			return strings.EqualFold(w.ID.Kind, s.ObjectKind) && s.MovedByName(w.File, w.ID.Name)
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

// Places are the files holding its fields, with the policy's namespace,
// and the namespace of every object holding one: a policy in a
// tenant's namespace must not reach files or objects outside it (a
// ConfigMap of another namespace is that namespace's, though no
// workload applies it).
func (Format) Places(def *gitrepo.Definition) []gitrepo.Place {
	out := plain.InstallPlaces(def)
	for _, s := range def.Setters {
		out = append(out, gitrepo.Place{Namespace: def.ID.Namespace, File: s.File})
		if s.Namespace != "" {
			out = append(out, gitrepo.Place{Namespace: s.Namespace, File: s.File})
		}
	}
	return out
}

// Annotated is the ImagePolicy's object in its own file (fluxctl lock
// writes fluxd's annotations there): for one a kustomization builds,
// the file of the kustomization's directory it was read from.
func (Format) Annotated(root string, def *gitrepo.Definition) (string, map[string]string, error) {
	if !def.Built {
		return def.File, def.RawAnnotations, nil
	}
	if def.ImagePolicy == nil || def.ImagePolicy.File == "" {
		return "", nil, plain.Unwritable(def)
	}
	return plain.ObjectIn(root, def.ImagePolicy.File, def)
}

func sortedWorkloads(m *gitrepo.Manifests) []platform.ID {
	ids := make([]platform.ID, 0, len(m.Workloads))
	for id := range m.Workloads {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, platform.ID.Compare)
	return ids
}
