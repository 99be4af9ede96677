// Package release plans and executes releases. A plan is computed from the
// manifests in git (not from the running cluster), so that after a release
// git and the cluster agree even where the cluster had drifted. Executing
// a plan edits the files, makes one commit, pushes it, applies the changed
// workloads and records the release in history; if the push fails,
// nothing is applied.
//
// A promotion (Spec.Promotion, promote.go) is a release of a pipeline's
// bundle into a stage's services: the images are given with their
// digests, checked against the registry, and committed through the same
// path.
//
// The package depends only on domain packages; the cluster, the git clone,
// the registry and the history store come in through the small interfaces
// in engine.go. The job queue that runs releases one at a time, with its
// persistence and watchers, is release/jobs: it imports this package,
// never the other way round.
package release
