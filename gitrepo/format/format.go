// Package format is where fluxd looks up how to release a workload
// according to the format git writes its images in (its Definition's
// Format, set where gitrepo reads it). One package per format holds all
// that format's release does, behind Handler:
//
//   - plain: a workload's own manifest (format/plain);
//   - kustomize: a workload a kustomization builds, its images: entries
//     (format/kustomize);
//   - setters: a Flux v2 ImagePolicy's $imagepolicy-marked fields
//     (format/setters);
//   - helm: a Flux HelmRelease's values (format/helm).
//
// Reading stays in gitrepo, which reads every format in one walk of the
// repository (a kustomization's build, the markers in every file a build
// reads): it sets Definition.Format there. What is shared by every
// format's edit, finding a YAML value's exact bytes and replacing only
// those, is package format/yamledit, beside them; gitrepo's verify.go
// reads every edit back. The release engine's edit, render check, apply, lock and
// scope paths call Of(def) and never tell formats apart themselves, as
// package policy reads the annotations of every tool once and writes
// them back in the dialect in use.
//
// format_test.go runs one contract table over every Handler.
package format

import (
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format/helm"
	"github.com/fluxd/fluxd/gitrepo/format/kustomize"
	"github.com/fluxd/fluxd/gitrepo/format/plain"
	"github.com/fluxd/fluxd/gitrepo/format/setters"
	"github.com/fluxd/fluxd/platform"
)

// Handler is what a release does to a workload of one format.
type Handler interface {
	// Format is the format it handles.
	Format() gitrepo.Format
	// Edit writes def's updates into files (path relative to root →
	// content; a file not there yet is read from the clone at root),
	// changing only the bytes of the values it sets. Each update names
	// the image it replaces: git holding another one refuses the edit
	// with a *gitrepo.ConflictError (compare-and-swap), and files is
	// then left as it was for that update.
	Edit(root string, def *gitrepo.Definition, updates []gitrepo.ImageUpdate, files map[string][]byte) error
	// Changes are what the updates change in what git renders, for the
	// render check (gitrepo.CheckRender).
	Changes(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, m *gitrepo.Manifests) []gitrepo.Change
	// Moves are the workloads the updates move: what the release
	// applies and follows, and whose locks and scope it answers to.
	Moves(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, m *gitrepo.Manifests) []platform.ID
	// Places are the files and namespaces a release of def touches
	// besides its own (def.File in def.ID.Namespace): a scoped instance
	// releases it only when its scope holds them all.
	Places(def *gitrepo.Definition) []gitrepo.Place
	// Annotated is the file where def's policy annotations are written
	// (fluxctl lock, automate, policy), and its annotations as written
	// there, or an error saying why fluxd cannot write them.
	Annotated(root string, def *gitrepo.Definition) (file string, raw map[string]string, err error)
}

var handlers = map[gitrepo.Format]Handler{
	gitrepo.FormatPlain:     plain.Format{},
	gitrepo.FormatKustomize: kustomize.Format{},
	gitrepo.FormatSetters:   setters.Format{},
	gitrepo.FormatHelm:      helm.Format{},
}

// For is format f's handler; plain's for a format it does not know.
func For(f gitrepo.Format) Handler {
	if h, ok := handlers[f]; ok {
		return h
	}
	return plain.Format{}
}

// Of is def's format's handler.
func Of(def *gitrepo.Definition) Handler { return For(def.Format) }

// All are the handlers of every format.
func All() []Handler {
	return []Handler{plain.Format{}, kustomize.Format{}, setters.Format{}, helm.Format{}}
}
