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
// Keys and keyless identities (under the profile's trusted root, with
// its tlog: setting) are verified. Not built yet (issue 33): attestations
// are parsed and checked for form but not verified (a profile naming them
// verifies nothing), and results are cached in memory only, not in the
// store. Load reads each trusted root into its profile
// (TrustedRootJSON), checked only to be JSON here: verify/cosign parses
// it. See docs/security.md.
package verify
