// Package torture is the model half of fluxd's randomized torture suite
// (e2e/torture_test.go): the seeded operation log that the suite plays
// against two fluxd replicas on the real stack, and the checkers that
// judge, from outside, what the run left in git, in the history database
// and in the cluster.
//
// Both halves are plain functions over plain values, so that a run can be
// replayed from its seed (Generate is deterministic) and each checker is
// tested on hand-made histories without a stack (check_test.go).
//
// The services are plain Deployments with fluxd's annotations, one that
// a kustomization builds (released through its images: entry), Flux v2
// ImagePolicies whose $imagepolicy markers set a Deployment's image (in a
// plain file, in a kustomize base that an overlay builds from, in a kind:
// List's item), and a Flux v2 HelmRelease with its image in its values.
// The model reads each format itself, apart from fluxd's readers
// (kustomize.go, fluxv2.go, helm.go), including how each is locked
// (LockedIn). Generate schedules, whatever it draws, a release of every
// format that the leader is killed in the middle of (Scheduled).
//
// The invariants, one checker each (see docs/torture.md):
//
//	(a) every fluxd commit's diff from its parent is exactly its job's
//	    recorded plan, from → to (a revert: the plan inverted; a policy
//	    commit: no image at all);
//	(b) no locked service was ever changed by fluxd;
//	(c) every person's commit is an ancestor of the head;
//	(d) no job is still queued or running once the run has settled;
//	(e) each job's recorded outcome matches git and the cluster;
//	(f) there is exactly one history row per job outcome;
//	(g) every format of the run has a fluxd commit that moves it.
package torture
