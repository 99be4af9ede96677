// Package kustomize is the format of a workload a kustomization builds
// (gitrepo.FormatKustomize): its Definition's File is the kustomization
// file, and a release writes the kustomization's images: entries
// (gitrepo.SetKustomizeImages), not the base it builds from, which other
// overlays share. The edit is built again and refused unless the
// workload then runs exactly the new images. A change moves that
// workload; the siblings sharing its images: entry must be released with
// it (release's kustomizeSiblings). Its policy annotations are not
// written: they belong in the base or a patch.
package kustomize

import (
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format/plain"
	"github.com/fluxd/fluxd/platform"
)

// Format is gitrepo.FormatKustomize's handler.
type Format struct{}

// Format implements format.Handler.
func (Format) Format() gitrepo.Format { return gitrepo.FormatKustomize }

// Edit writes updates into the kustomization's images: entries, after
// checking that the workload, as built, runs each update's From.
func (Format) Edit(root string, def *gitrepo.Definition, updates []gitrepo.ImageUpdate, files map[string][]byte) error {
	content, err := plain.Content(root, def.File, files)
	if err != nil {
		return err
	}
	current := map[string]string{}
	for _, c := range def.Containers {
		current[c.Name] = c.Image
	}
	images := map[string]string{}
	for _, u := range updates {
		images[u.Container] = u.To
		if cur, ok := current[u.Container]; ok && cur != u.From {
			err = &gitrepo.ConflictError{ID: def.ID, What: fmt.Sprintf("container %s's image (as %s builds it)", u.Container, def.File), Want: u.From, Got: cur}
		}
	}
	var out []byte
	if err == nil {
		out, err = gitrepo.SetKustomizeImages(root, def.File, content, def.ID, current, images)
	}
	if err != nil {
		return fmt.Errorf("editing %s in %s: %w", def.ID, def.File, err)
	}
	files[def.File] = out
	return nil
}

// Changes are the built workload's containers' changes.
func (Format) Changes(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []gitrepo.Change {
	return plain.Changes(def.ID, updates)
}

// Moves is the built workload.
func (Format) Moves(def *gitrepo.Definition, _ []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []platform.ID {
	return plain.Self(def)
}

// Places: see plain.InstallPlaces.
func (Format) Places(def *gitrepo.Definition) []gitrepo.Place { return plain.InstallPlaces(def) }

// Annotated refuses: see plain.Unwritable.
func (Format) Annotated(_ string, def *gitrepo.Definition) (string, map[string]string, error) {
	return "", nil, plain.Unwritable(def)
}
