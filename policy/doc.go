// Package policy is the vocabulary of a workload's policy annotations:
// fluxd's own (fluxd.io/...), and the dialects of the tools teams move
// from, Flux v1 (fluxcd.io/ and the older flux.weave.works/) and Keel
// (keel.sh/policy, keel.sh/match-tag).
//
// Everything that reads a policy reads fluxd's own vocabulary only: Read
// turns a workload's annotations, as written in git, into that vocabulary
// once, where manifests are parsed (gitrepo.ParseFile). Everything that
// writes a policy hands Write a change in fluxd's vocabulary, and Write
// says which annotations to write so that the change is made in the
// dialect the workload already uses. No caller translates on its own.
//
// Where dialects disagree on one workload, fluxd's own wins, then
// fluxcd.io/, then flux.weave.works/, then keel.sh/, and Read warns.
package policy
