package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Verifier checks one image digest against one profile. verify/cosign's
// Verifier is one; Cached puts a Cache in front of one.
type Verifier interface {
	Verify(ctx context.Context, repository, digest string, p *Profile, keys []PublicKey) (Result, error)
}

// ErrNotBuilt is returned for a profile that asks for what is not built
// yet (keyless identities; attestations without keys): such a profile
// verifies nothing, rather than passing what it was meant to check.
var ErrNotBuilt = errors.New("not implemented yet")

// CacheKey is what a result is kept by: the repository (signatures are
// stored beside the image, so the same digest in another repository has
// its own), the digest, and the profile as it was when checked
// (Fingerprint), so that a profile given another key checks again.
type CacheKey struct {
	Repository, Digest, Profile string
}

// Entry is a result kept, and when it was reached.
type Entry struct {
	Result    Result
	CheckedAt time.Time
}

// Final says whether r is kept for good: only Verified is. A digest
// verified by a key stays verified (the signature is over the digest,
// which cannot change). Unsigned and Failed may turn: cosign signs after
// the push (a digest is unsigned for a moment), and adds signatures
// beside those there (a wrong-key result turns when the right key signs
// too).
func Final(r Result) bool { return r.Outcome == Verified }

// Cache keeps verification results per digest: MemoryCache in one
// process, and verify/storecache over the history store that the
// replicas share.
type Cache interface {
	// Get returns the entry kept for k; false when there is none.
	Get(ctx context.Context, k CacheKey) (Entry, bool, error)
	// Put keeps e for k. A final entry already kept for k stays: a
	// verification running late must not turn a verified digest back
	// into an unsigned one for the other replicas.
	Put(ctx context.Context, k CacheKey, e Entry) error
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
	if len(p.Keyless) > 0 {
		// Expressions have matched whole values only since this
		// field: a digest verified before under an alternation's
		// unanchored branch (^A|B$) is checked again.
		field("regexps=whole")
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

// DefaultRecheck is how long an unsigned or failed result is kept
// before the registry is asked again.
const DefaultRecheck = time.Minute

type askAgainKey struct{}

// AskAgain marks ctx as a person's request (a release by hand, its dry
// run): Cached verifies again an unsigned or failed result instead of
// keeping it for DefaultRecheck, so that an image signed (or attested) a
// moment ago is released at once. It costs a person's plan the lookups
// of its unverified candidates (two requests each, the .sig tag and the
// referrers); a verified result stays final. Automation and listings
// keep the interval.
func AskAgain(ctx context.Context) context.Context {
	return context.WithValue(ctx, askAgainKey{}, true)
}

func askedAgain(ctx context.Context) bool {
	v, _ := ctx.Value(askAgainKey{}).(bool)
	return v
}

// Source says where Cached found a result, for metrics.
type Source string

// The sources.
const (
	// FromMemory: this process's cache, no request.
	FromMemory Source = "memory"
	// FromStore: the store the replicas share, no request to the
	// registry.
	FromStore Source = "store"
	// FromRegistry: verified, with requests to the registry.
	FromRegistry Source = "registry"
)

// Cached is a Verifier that asks its caches first: Memory, then Store
// (shared by replicas). A verified result is final, so a digest verified
// under a profile is never verified again, by this process or another
// sharing the Store, until the profile changes (its Fingerprint: another
// key, identity or attestation). An unsigned or failed result is kept
// for Recheck only, so that a plan or image listing does not ask the
// registry at every turn, while a signature pushed after the image is
// seen within Recheck. An error (a registry that could not be asked) is
// never kept.
type Cached struct {
	Verifier Verifier
	// Memory is this process's cache, asked first (nil: none).
	Memory Cache
	// Store is the cache the replicas share (nil: none). It failing
	// costs a verification, never an answer.
	Store Cache
	// Recheck is how long a result that is not final is kept
	// (0: DefaultRecheck).
	Recheck time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Observe, when set, is told where each result came from.
	Observe func(Source, Result)
	// StoreError, when set, is told of a Store that could not be read
	// or written.
	StoreError func(error)
}

// Verify returns the cached result for the digest under p, or verifies it.
func (c Cached) Verify(ctx context.Context, repository, digest string, p *Profile, keys []PublicKey) (Result, error) {
	k := CacheKey{repository, digest, Fingerprint(p, keys)}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	recheck := c.Recheck
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	asked := askedAgain(ctx)
	fresh := func(e Entry) bool {
		if Final(e.Result) {
			return true
		}
		if asked {
			return false
		}
		// A checked-at in the future (another replica's clock ahead)
		// is trusted no further than Recheck ahead.
		age := now().Sub(e.CheckedAt)
		return age < recheck && age > -recheck
	}
	found := func(src Source, e Entry) Result {
		r := e.Result
		r.Digest, r.Profile = digest, p.Name
		if c.Observe != nil {
			c.Observe(src, r)
		}
		return r
	}
	if c.Memory != nil {
		if e, ok, err := c.Memory.Get(ctx, k); err == nil && ok && fresh(e) {
			return found(FromMemory, e), nil
		}
	}
	if c.Store != nil {
		e, ok, err := c.Store.Get(ctx, k)
		if err != nil {
			c.storeError(err)
		}
		if err == nil && ok && fresh(e) {
			if c.Memory != nil {
				_ = c.Memory.Put(ctx, k, e)
			}
			return found(FromStore, e), nil
		}
	}
	r, err := c.Verifier.Verify(ctx, repository, digest, p, keys)
	if err != nil {
		return r, err
	}
	if c.Observe != nil {
		c.Observe(FromRegistry, r)
	}
	e := Entry{Result: r, CheckedAt: now()}
	// A cache that cannot keep the result costs a verification later,
	// not this answer.
	if c.Memory != nil {
		_ = c.Memory.Put(ctx, k, e)
	}
	if c.Store != nil {
		if err := c.Store.Put(ctx, k, e); err != nil {
			c.storeError(err)
		}
	}
	return r, nil
}

func (c Cached) storeError(err error) {
	if c.StoreError != nil {
		c.StoreError(err)
	}
}

// MemoryCache is a Cache in memory.
type MemoryCache struct {
	mu sync.Mutex
	m  map[CacheKey]Entry
}

// Get returns the entry kept for k.
func (c *MemoryCache) Get(_ context.Context, k CacheKey) (Entry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e, ok, nil
}

// Put keeps e for k, unless a final entry is kept for it.
func (c *MemoryCache) Put(_ context.Context, k CacheKey, e Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[CacheKey]Entry{}
	}
	if old, ok := c.m[k]; ok && Final(old.Result) {
		return nil
	}
	c.m[k] = e
	return nil
}
