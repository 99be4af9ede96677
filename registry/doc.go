// Package registry names what fluxd knows of container images: a
// repository's images with their tags, digests and creation times, and
// how image references split into repository and tag. The adapter that
// reads real registries, with go-containerregistry, is registry/oci.
//
// Filter is the policy that chooses a tag, and it never surprises: with no
// filter only versions are candidates, written like the running tag (on
// 1.2.3: 1.2.4 and 2.0.0, never latest, main-abc1234, 1.2.4-rc.1, v1.2.4
// or 20260101); the semver levels patch, minor and major pass versions with
// the running tag's leading v (or none) and count of numbers (semver:major
// on 1.4.5 passes 2.0.0, not 3050); latest or a branch is chosen only by a
// glob or regex that matches it (glob:latest, glob:main-*); a service
// running a tag that is not a version, with no filter, is never moved.
package registry
