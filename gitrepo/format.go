package gitrepo

import "github.com/fluxd/fluxd/platform"

// Format is how git writes a workload's images, and so how fluxd reads
// and edits them and what a change of them applies: one of the four
// below, set on a Definition where it is read (ParseFile, a
// kustomization's build, attachImageAutomation). Package gitrepo/format
// holds, for each, the one place that edits it and says what its change
// moves; the engine looks the format up there rather than telling
// formats apart itself.
type Format string

const (
	// FormatPlain is a workload's own manifest (Deployment, StatefulSet,
	// DaemonSet, CronJob; in a List too): its containers' image fields.
	FormatPlain Format = "plain"
	// FormatKustomize is a workload a kustomization builds: its images
	// are released through the kustomization's images: entries.
	FormatKustomize Format = "kustomize"
	// FormatSetters is a Flux v2 ImagePolicy's service: its containers
	// are the fields $imagepolicy markers mark (setters.go).
	FormatSetters Format = "setters"
	// FormatHelm is a Flux HelmRelease: its images are in spec.values
	// (helm.go), in its own file or, built by a kustomization, in the
	// file it is built from (Definition.Source).
	FormatHelm Format = "helm"
)

// KindFormat is the format a workload of kind (as platform.ID names it)
// is read in from a plain file: Helm values for a HelmRelease, its own
// manifest otherwise (an ImagePolicy's service becomes FormatSetters
// once its ImagePolicy is read, attachImageAutomation, so Format is
// FormatSetters exactly when Definition.ImagePolicy is set). The only
// place a kind tells a format.
func KindFormat(kind string) Format {
	switch kind {
	case platform.KindHelmRelease:
		return FormatHelm
	}
	return FormatPlain
}

// ImageUpdate is one container's planned image change, as the formats'
// editors take it: Container names the container (for FormatSetters, the
// marked field), From is the image git must hold now (compare-and-swap),
// To the new one.
type ImageUpdate struct{ Container, From, To string }

// Place is a file and a namespace a workload's release touches: a scoped
// instance may release it only when its scope holds every one.
type Place struct{ Namespace, File string }
