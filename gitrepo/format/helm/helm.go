// Package helm is the format of a Flux HelmRelease (gitrepo.FormatHelm):
// its containers are the images its spec.values make (package
// helmrelease finds them; gitrepo's helm.go reads them into a
// Definition), and a release writes them back there in the fields and
// form they have (gitrepo.SetHelmImages, byte for byte,
// compare-and-swap), in the HelmRelease's own file, or, for one a
// kustomization builds from a file of its own directory unrenamed, in
// that file (Definition.Source). A change moves the HelmRelease, whose
// controller then upgrades the release; the render check applies it to
// the rendered values as the rules that found the image do.
//
// How fluxd edits a HelmRelease, file by file: package helmrelease
// (which values are images, and how an image is split across them);
// gitrepo/helm.go (reading them into a Definition, the byte edit
// SetHelmImages, the render check's applyHelm, and Source for one a
// kustomization builds), on package gitrepo/format/yamledit's spans;
// this package (which file the edit goes to, what it moves, which
// namespaces a scope must hold, where its policy is written); and, in
// the cluster, platform/kube's apply.go (applying it) and helm.go
// (following the controller's upgrade).
package helm

import (
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format/plain"
	"github.com/fluxd/fluxd/platform"
)

// Format is gitrepo.FormatHelm's handler.
type Format struct{}

// Format implements format.Handler.
func (Format) Format() gitrepo.Format { return gitrepo.FormatHelm }

// File is where def's values are edited: its own file, or the one a
// kustomization builds it from.
func File(def *gitrepo.Definition) string {
	if def.Built && def.Source != "" {
		return def.Source
	}
	return def.File
}

// Edit writes updates into the HelmRelease's values.
func (Format) Edit(root string, def *gitrepo.Definition, updates []gitrepo.ImageUpdate, files map[string][]byte) error {
	return plain.EditIn(root, File(def), def.ID, updates, files, gitrepo.SetHelmImages)
}

// Changes are the HelmRelease's containers' changes (gitrepo's render
// check applies them to its values).
func (Format) Changes(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []gitrepo.Change {
	return plain.Changes(def.ID, updates)
}

// Moves is the HelmRelease.
func (Format) Moves(def *gitrepo.Definition, _ []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []platform.ID {
	return plain.Self(def)
}

// Places are the namespaces it installs into (spec.targetNamespace,
// spec.storageNamespace) besides its own.
func (Format) Places(def *gitrepo.Definition) []gitrepo.Place { return plain.InstallPlaces(def) }

// Annotated is the HelmRelease's object in its own file, or, built, in
// the file it is built from.
func (Format) Annotated(root string, def *gitrepo.Definition) (string, map[string]string, error) {
	if def.Built {
		if def.Source == "" {
			return "", nil, plain.Unwritable(def)
		}
		return plain.ObjectIn(root, def.Source, def)
	}
	return def.File, def.RawAnnotations, nil
}
