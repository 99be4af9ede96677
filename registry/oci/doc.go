// Package oci reads container registries with go-containerregistry: it
// lists a repository's tags (following pagination) and fetches each tag's
// digest and creation time, concurrently under a limit, reusing one
// transport (remote.Puller) for every request so the registry is pinged
// once, not once per tag. Creation times are remembered per digest, so a
// tag seen before costs one manifest request, not two.
package oci
