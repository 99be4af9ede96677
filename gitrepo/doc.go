// Package gitrepo keeps a working clone of the manifests repository, finds
// the workload definitions in it, edits their images without disturbing
// comments or layout, and commits and pushes the result.
//
// Not built yet: see the README's feature table ([core] issue).
package gitrepo
