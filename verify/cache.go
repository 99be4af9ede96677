package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Verifier checks one image digest against one profile. verify/cosign's
// Verifier is one; Cached puts a Cache in front of one.
type Verifier interface {
	Verify(ctx context.Context, repository, digest string, p *Profile, keys []PublicKey) (Result, error)
}

// ErrNotBuilt is returned for a profile that asks for what is not built
// yet (keyless identities, attestations): such a profile verifies
// nothing, rather than passing what it was meant to check.
var ErrNotBuilt = errors.New("not implemented yet")

// CacheKey is what a result is kept by: the repository (signatures are
// stored beside the image, so the same digest in another repository has
// its own), the digest, and the profile as it was when checked
// (Fingerprint), so that a profile given another key checks again.
type CacheKey struct {
	Repository, Digest, Profile string
}

// Cache keeps verification results per digest. The store will hold them
// (shared by replicas, issue 33); MemoryCache is for one process and
// tests.
type Cache interface {
	Get(ctx context.Context, k CacheKey) (Result, bool, error)
	Put(ctx context.Context, k CacheKey, r Result) error
}

// Fingerprint names a profile's content: its name, key IDs, identities,
// trusted root (file and content), tlog setting and attestations. Two profiles with the same
// fingerprint verify alike.
func Fingerprint(p *Profile, keys []PublicKey) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s,", len(s), s) }
	field(p.Name)
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	slices.Sort(ids)
	for _, id := range ids {
		field("key=" + id)
	}
	for _, id := range p.Keyless {
		field("issuer=" + id.Issuer)
		if id.IssuerRegexp != nil {
			field("issuerRegexp=" + id.IssuerRegexp.String())
		}
		field("subject=" + id.Subject)
		if id.SubjectRegexp != nil {
			field("subjectRegexp=" + id.SubjectRegexp.String())
		}
	}
	field("trustedRoot=" + p.TrustedRoot)
	// The root's content, not only its file: a CA taken out of it must
	// not leave what it vouched for verified.
	root := sha256.Sum256(p.TrustedRootJSON)
	field("trustedRootSHA256=" + hex.EncodeToString(root[:]))
	field("tlog=" + string(p.Tlog))
	for _, a := range p.Attestations {
		field("attestation=" + a)
	}
	return p.Name + "@" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Cached is a Verifier that asks its Cache first, and keeps what is
// final: a digest verified by a key stays verified, so an unchanged
// digest is never verified twice. Unsigned and failed results are not
// kept: cosign signs after the push (a digest is unsigned for a moment),
// and adds signatures beside those there (a wrong-key result may turn).
type Cached struct {
	Verifier Verifier
	Cache    Cache
}

// Verify returns the cached result for the digest under p, or verifies it.
func (c Cached) Verify(ctx context.Context, repository, digest string, p *Profile, keys []PublicKey) (Result, error) {
	k := CacheKey{repository, digest, Fingerprint(p, keys)}
	if r, ok, err := c.Cache.Get(ctx, k); err == nil && ok {
		return r, nil
	}
	r, err := c.Verifier.Verify(ctx, repository, digest, p, keys)
	if err != nil || r.Outcome != Verified {
		return r, err
	}
	// A cache that cannot keep the result costs a verification later,
	// not this answer.
	_ = c.Cache.Put(ctx, k, r)
	return r, nil
}

// MemoryCache is a Cache in memory.
type MemoryCache struct {
	mu sync.Mutex
	m  map[CacheKey]Result
}

// Get returns the result kept for k.
func (c *MemoryCache) Get(_ context.Context, k CacheKey) (Result, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	return r, ok, nil
}

// Put keeps r for k.
func (c *MemoryCache) Put(_ context.Context, k CacheKey, r Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[CacheKey]Result{}
	}
	c.m[k] = r
	return nil
}
