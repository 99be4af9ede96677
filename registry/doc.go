// Package registry names what fluxd knows of container images: a
// repository's images with their tags, digests and creation times, and
// how image references split into repository and tag. The adapter that
// reads real registries, with go-containerregistry, is registry/oci.
package registry
