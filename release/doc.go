// Package release plans and executes releases: given a spec (which
// services, which images), it computes from the manifests in git what
// changes, and then commits, pushes, applies and follows the rollout.
//
// Not built yet: see the README's feature table ([core] issue).
package release
