// Package policy is the vocabulary of a workload's policy annotations:
// fluxd's own (fluxd.io/...), and the dialects of the tools teams move
// from, Flux v1 (fluxcd.io/, its filter.fluxcd.io/CONTAINER filters, and
// the older flux.weave.works/) and Keel (keel.sh/policy,
// keel.sh/match-tag).
//
// Everything that reads a policy reads fluxd's own vocabulary only: Read
// turns a workload's annotations, as written in git, into that vocabulary
// once, where manifests are parsed (gitrepo.ParseFile). Everything that
// writes a policy hands Write a change in fluxd's vocabulary, and Write
// says which annotations to write so that the change is made in the
// dialect the workload already uses. No caller translates on its own.
//
// Where dialects disagree on one workload, fluxd's own wins, then
// fluxcd.io/, filter.fluxcd.io/, flux.weave.works/, keel.sh/, and Read
// warns. What a dialect defines but does nothing on an object (a key
// fluxd does not read, a filter naming no container, a HelmRelease
// mapping elsewhere) is said by Unhonoured, so that nothing is ignored
// without a word.
package policy
