package history

import (
	"context"
	"time"
)

// VerificationResult is the outcome of checking one image digest's
// signatures under one verification profile, kept so that the replicas
// sharing a store do not each ask the registry (verify.Cached decides
// what is kept, and for how long). Like the registry cache, it is shared
// by every instance: a fact about an image, not anything an instance did.
type VerificationResult struct {
	// Repository, Digest and Profile are the key: Profile is the
	// profile's fingerprint (its name and a hash of its keys, identities
	// and attestations), so that a changed profile is checked again.
	Repository, Digest, Profile string
	// Outcome is verify's (verified, unsigned, failed).
	Outcome string
	// Final results stay: saving another result of the same key over
	// one leaves it.
	Final                  bool
	Signer, Reason, Detail string
	CheckedAt              time.Time
}

// VerificationResults keeps image signature verification results.
type VerificationResults interface {
	// VerificationResult returns the result kept for the key, or an
	// error wrapping ErrNotFound.
	VerificationResult(ctx context.Context, repository, digest, profile string) (VerificationResult, error)
	// SaveVerificationResult keeps r, in place of the result of its key,
	// unless that one is Final (which stays as it is).
	SaveVerificationResult(ctx context.Context, r VerificationResult) error
}
