// Package plain is the format of a workload's own manifest
// (gitrepo.FormatPlain): a Deployment, StatefulSet, DaemonSet or
// CronJob in a file of its own, in a multi-document file or a List, whose
// containers' image fields a release edits in place (gitrepo.SetImages,
// byte for byte, compare-and-swap). A change moves that workload alone.
//
// Its helpers (EditIn, Changes, Self, InstallPlaces, ObjectIn) are the
// ones the other formats share where they act as a plain file does.
package plain

import (
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// Format is gitrepo.FormatPlain's handler.
type Format struct{}

// Format implements format.Handler.
func (Format) Format() gitrepo.Format { return gitrepo.FormatPlain }

// Edit writes updates into def's own file.
func (Format) Edit(root string, def *gitrepo.Definition, updates []gitrepo.ImageUpdate, files map[string][]byte) error {
	return EditIn(root, def.File, def.ID, updates, files, gitrepo.SetImages)
}

// Changes are the workload's own containers' changes.
func (Format) Changes(def *gitrepo.Definition, updates []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []gitrepo.Change {
	return Changes(def.ID, updates)
}

// Moves is the workload itself.
func (Format) Moves(def *gitrepo.Definition, _ []gitrepo.ImageUpdate, _ *gitrepo.Manifests) []platform.ID {
	return Self(def)
}

// Places are the namespaces it installs into besides its own (none for
// a plain workload; see InstallPlaces).
func (Format) Places(def *gitrepo.Definition) []gitrepo.Place { return InstallPlaces(def) }

// Annotated is the workload's own file and annotations.
func (Format) Annotated(_ string, def *gitrepo.Definition) (string, map[string]string, error) {
	return def.File, def.RawAnnotations, nil
}

// EditIn sets workload id's images in file with set (gitrepo.SetImages,
// gitrepo.SetHelmImages), from files or, the first time, the clone at
// root, and puts the result in files. Every update names the image it
// replaces: git holding another one refuses it (*gitrepo.ConflictError).
func EditIn(root, file string, id platform.ID, updates []gitrepo.ImageUpdate, files map[string][]byte,
	set func(content []byte, id platform.ID, changes map[string]gitrepo.ImageChange) ([]byte, error)) error {
	content, err := Content(root, file, files)
	if err != nil {
		return err
	}
	changes := map[string]gitrepo.ImageChange{}
	for _, u := range updates {
		changes[u.Container] = gitrepo.ImageChange{From: u.From, To: u.To}
	}
	out, err := set(content, id, changes)
	if err != nil {
		return fmt.Errorf("editing %s in %s: %w", id, file, err)
	}
	files[file] = out
	return nil
}

// Content is file as an edit in progress holds it (files), or as the
// clone at root does.
func Content(root, file string, files map[string][]byte) ([]byte, error) {
	if b, ok := files[file]; ok {
		return b, nil
	}
	return gitrepo.ReadFile(root, file)
}

// Changes are updates as render changes of workload id's containers.
func Changes(id platform.ID, updates []gitrepo.ImageUpdate) []gitrepo.Change {
	var out []gitrepo.Change
	for _, u := range updates {
		out = append(out, gitrepo.Change{Workload: id, Container: u.Container, From: u.From, To: u.To})
	}
	return out
}

// Self is def's own workload, which its change moves.
func Self(def *gitrepo.Definition) []platform.ID { return []platform.ID{def.ID} }

// InstallPlaces are the namespaces def installs into besides its own (a
// HelmRelease's targetNamespace and storageNamespace), with its file.
func InstallPlaces(def *gitrepo.Definition) []gitrepo.Place {
	var out []gitrepo.Place
	for _, ns := range def.InstallsInto {
		out = append(out, gitrepo.Place{Namespace: ns, File: def.File})
	}
	return out
}

// ObjectIn is file (relative to root) and the annotations, as written
// there, of def's object in it: where the policy of an object a
// kustomization builds from a file of its own directory is written.
func ObjectIn(root, file string, def *gitrepo.Definition) (string, map[string]string, error) {
	content, err := gitrepo.ReadFile(root, file)
	if err != nil {
		return "", nil, err
	}
	defs, err := gitrepo.ParseFile(file, content)
	if err != nil {
		return "", nil, fluxerr.New(fluxerr.User, err, "")
	}
	for _, d := range defs {
		if d.ID == def.ID {
			return file, d.RawAnnotations, nil
		}
	}
	// The kustomization renamed it (a namespace:, namePrefix or
	// nameSuffix), so the object in the file is not the one built.
	return "", nil, fluxerr.New(fluxerr.User, fmt.Errorf("%s is built by the kustomization %s from %s, where the ImagePolicy has another name or namespace", def.ID, def.File, file),
		"The kustomization renames the ImagePolicy (namespace:, namePrefix: or nameSuffix:), so fluxd cannot tell which object to annotate. Add the annotations yourself, on the ImagePolicy in "+file+". Nothing was changed.")
}

// Unwritable is the error of a policy change to def, which a
// kustomization builds from a base: its annotations belong in the base
// or a patch, which fluxd does not pick for you.
func Unwritable(def *gitrepo.Definition) error {
	return fluxerr.New(fluxerr.User, fmt.Errorf("%s is built by the kustomization %s, where fluxd cannot write its annotations", def.ID, def.File),
		"fluxd keeps policies as annotations on the workload; in a kustomize layout add them yourself, in the base or in a patch of that kustomization (commonAnnotations applies to every object). Nothing was changed.")
}
