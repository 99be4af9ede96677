// Package verify names what fluxd requires of an image's signatures
// before it may release it, and what it found: the verification config
// that --verify-config will name (profiles of signers, and which
// repositories need which profile), the annotations that ask for a profile
// on a workload or one of its containers, and the outcome of checking one
// image digest (verified by a signer, unsigned, or failed and why).
//
// The adapter that checks a digest against a registry, with the sigstore
// libraries and go-containerregistry, is verify/cosign.
//
// fluxd --verify-config loads the config (OpenFile, Watch) and hands a
// Gate to the release engine, whose plans ask it (release/verify.go).
// A profile's keys come from files, and from Kubernetes Secrets
// (keySecrets, each .pub data key a public key) that fluxd reads through
// a SecretKeys func (OpenFileWith; verify itself has no Kubernetes
// client), read again every SecretPollInterval by Watch.
//
// Keys and keyless identities (under the profile's trusted root, with
// its tlog: setting) are verified. Load reads each trusted root into its
// profile (TrustedRootJSON), checked only to be JSON here: verify/cosign
// parses it.
//
// Results are cached (Cached) per repository, digest and profile
// fingerprint, in memory and in the history store the replicas share
// (verify/storecache): a verified digest is never verified again; an
// unsigned or failed one is asked again after DefaultRecheck; an error
// is never kept.
//
// A profile's required attestations (predicate types) are verified
// after its signature, with its keys (verify/cosign's attest.go): a
// missing one fails with MissingAttestation. Not built yet (issue 33):
// attestations signed keyless. See docs/security.md.
package verify
