// Package helmrelease finds the images in a HelmRelease's spec.values, by
// the rules Flux v1's helm-operator documented, so that a HelmRelease is a
// service like a Deployment: its "containers" are the images its values
// name, and a release edits those values.
//
// Both readers of a HelmRelease use it: gitrepo, over the YAML in git
// (to edit the bytes in place), and platform/kube, over the object in the
// cluster (to show what runs). The rules are here once.
//
// The forms read (each may sit at any depth of spec.values):
//
//	image: repo:tag                      # a string
//	image: repo                          # a string, with a sibling tag
//	tag: "1.2"
//	image: {repository: repo:tag}
//	image: {repository: repo, tag: "1.2"}
//	image: {registry: reg.io, repository: team/app, tag: "1.2"}
//
// The image at the top level of values is container "chart-image", as in
// Flux v1; one under values.backend is container "backend"; deeper, the
// keys joined by dots ("backend.worker"); in a list, the list's path and
// the item's index ("sidecars.0"). YAML aliases and merge keys are read as
// Helm reads them, as copies; a value reached through one is written where
// its anchor is defined, only when every alias agrees (anchors.go). Flux v1's annotations
// repository.fluxcd.io/<name>, tag.fluxcd.io/<name> and
// registry.fluxcd.io/<name> name the dotted paths of a container's parts
// where a chart keeps them elsewhere.
package helmrelease
