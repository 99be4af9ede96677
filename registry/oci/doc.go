// Package oci reads container registries with go-containerregistry: it
// lists a repository's tags (following pagination) and fetches each tag's
// digest and creation time, concurrently under a limit, reusing one
// transport (remote.Puller) for every request so the registry is pinged
// once, not once per tag. Creation times are remembered per digest, so a
// tag seen before costs one manifest request, not two.
//
// Credentials come from keychains tried in order (Config.Keychains, then
// --docker-config and the default docker config). A SecretKeychain reads
// Credentials from a SecretSource: a workload's pull secret is offered
// only for the repositories of the images its workloads run, the
// operator's (--registry-secret, --registry-credentials) for every
// repository. The client remembers which source gave each repository its
// credentials, so a refusal names that source, never the credentials.
//
// Files, one concern each (go-containerregistry's remote/ is the model):
// client.go (Config, Client, New), list.go (tag lists and Exists),
// scan.go (Images, Refresh, Cached: a repository's tags with digests and
// times, against the cache), metadata.go (an image's config: creation
// time, labels, platform), status.go (a repository's refresh status and
// re-check back-off), errors.go (what a failed request tells a person),
// keychain.go and credentials.go (where credentials come from),
// ratelimit.go and taglimit.go (what the client asks of a registry).
package oci
