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
	"slices"
	"strings"

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

// Builds are the workloads of this format by the kustomization file
// that builds them, in order: the workloads whose images one images:
// entry of that file may set. (A HelmRelease's values are not in the
// images: entries, nor is an ImagePolicy's service, whose containers are
// its marked fields: they are formats of their own.)
func Builds(m *gitrepo.Manifests) map[string][]platform.ID {
	ids := make([]platform.ID, 0, len(m.Workloads))
	for id := range m.Workloads {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, platform.ID.Compare)
	out := map[string][]platform.ID{}
	for _, id := range ids {
		if def := m.Workloads[id]; def.Format == gitrepo.FormatKustomize {
			out[def.File] = append(out[def.File], id)
		}
	}
	return out
}

// Sharing are the workloads besides def that its kustomization builds
// (builds, from Builds) running repository repo: an images: entry for
// repo, which a release of def writes, moves them with it.
func Sharing(def *gitrepo.Definition, repo string, builds map[string][]platform.ID, m *gitrepo.Manifests) []platform.ID {
	var out []platform.ID
	for _, id := range builds[def.File] {
		if id != def.ID && runsRepo(m.Workloads[id], repo) {
			out = append(out, id)
		}
	}
	return out
}

func runsRepo(def *gitrepo.Definition, repo string) bool {
	for _, c := range def.Containers {
		if Repository(c.Image) == repo {
			return true
		}
	}
	return false
}

// Repository is an image reference's repository, its tag and digest
// dropped, as kustomize's images: entries match it.
func Repository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i]
	}
	return ref
}
