package verify

import "fmt"

// Outcome is what checking an image digest's signatures found.
type Outcome string

// The outcomes. Only Verified lets an image be released where a profile
// applies; Unsigned and Failed are both refusals, told apart because
// they call for different fixes (sign the image; find out who signed it,
// or what was copied).
const (
	Verified Outcome = "verified"
	Unsigned Outcome = "unsigned"
	Failed   Outcome = "failed"
)

// Reason is why a verification failed.
type Reason string

// The reasons.
const (
	// WrongKey: the digest has signatures, none by a key the profile
	// names (signed by someone else, or a signature that does not check).
	WrongKey Reason = "wrong-key"
	// DigestMismatch: a signature by a key the profile names, but over
	// another digest: a signature copied beside an image it was not made
	// for.
	DigestMismatch Reason = "digest-mismatch"
	// Malformed: what is stored as the digest's signature is not one
	// cosign writes (an undecodable signature, a payload that is not
	// cosign's).
	Malformed Reason = "malformed"
	// MissingAttestation: the image is signed, but carries no
	// attestation of a predicate type the profile requires (no SBOM, no
	// provenance): Detail names the type.
	MissingAttestation Reason = "missing-attestation"
	// WrongIdentity: a keyless signature whose certificate chains to the
	// trusted root, but was issued to an identity (OIDC issuer and
	// subject) the profile does not name.
	WrongIdentity Reason = "wrong-identity"
	// UntrustedCertificate: a keyless signature whose certificate does
	// not chain to a CA of the profile's trusted root, is not for code
	// signing, or was not valid when it signed (expired, not yet valid).
	UntrustedCertificate Reason = "untrusted-certificate"
	// Unlogged: a keyless signature without a transparency-log entry
	// that a log of the trusted root signed, where the profile requires
	// one (tlog: required).
	Unlogged Reason = "unlogged"
)

// Result is the verification of one image digest under one profile.
type Result struct {
	// Digest is the image's manifest digest (sha256:...): what was
	// verified, and what a release must pin for it to be what runs.
	Digest  string
	Profile string
	Outcome Outcome
	// Signer names who signed, for Verified: a key's ID (sha256:... of
	// its public key) and file, or "keyless", the certificate's OIDC
	// issuer and its subject.
	Signer string
	// Reason and Detail say why, for Failed (Detail for Unsigned too).
	Reason Reason
	Detail string
}

// String is the result as a plan line shows it.
func (r Result) String() string {
	switch r.Outcome {
	case Verified:
		return fmt.Sprintf("verified by %s", r.Signer)
	case Failed:
		return fmt.Sprintf("failed (%s): %s", r.Reason, r.Detail)
	case Unsigned:
		if r.Detail != "" {
			return "unsigned: " + r.Detail
		}
		return "unsigned"
	}
	return string(r.Outcome)
}
