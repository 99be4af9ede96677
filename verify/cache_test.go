package verify

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a, b := PublicKey{ID: "sha256:aa"}, PublicKey{ID: "sha256:bb"}
	p := &Profile{Name: "ci", Keys: []string{"a.pub", "b.pub"}}
	base := Fingerprint(p, []PublicKey{a, b})
	if got := Fingerprint(p, []PublicKey{b, a}); got != base {
		t.Errorf("the order of the keys changed the fingerprint: %s, %s", got, base)
	}
	if got := Fingerprint(&Profile{Name: "ci", Keys: []string{"elsewhere/a.pub", "b.pub"}}, []PublicKey{a, b}); got != base {
		t.Errorf("the same keys in other files changed the fingerprint")
	}
	for name, q := range map[string]struct {
		p    *Profile
		keys []PublicKey
	}{
		"a key less":     {p, []PublicKey{a}},
		"another name":   {&Profile{Name: "cd"}, []PublicKey{a, b}},
		"an attestation": {&Profile{Name: "ci", Attestations: []string{"https://spdx.dev/Document"}}, []PublicKey{a, b}},
		"an identity": {&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^a$`)}}},
			[]PublicKey{a, b}},
	} {
		if got := Fingerprint(q.p, q.keys); got == base {
			t.Errorf("%s: same fingerprint %s", name, got)
		}
	}
	x := Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^a$`)}}}, nil)
	y := Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^b$`)}}}, nil)
	if x == y {
		t.Errorf("another subject, same fingerprint")
	}
	ci := func(root string, tlog TlogMode) string {
		return Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", Subject: "a"}},
			TrustedRoot: "r.json", TrustedRootJSON: []byte(root), Tlog: tlog}, nil)
	}
	if ci(`{"a":1}`, TlogRequired) == ci(`{"a":2}`, TlogRequired) {
		t.Errorf("another trusted root in the same file, same fingerprint")
	}
	if ci(`{}`, TlogRequired) == ci(`{}`, TlogIgnore) {
		t.Errorf("another tlog setting, same fingerprint")
	}
}

// scripted answers each Verify with the next of its results, counting.
type scripted struct {
	n       int
	answers []scriptedAnswer
}

type scriptedAnswer struct {
	r   Result
	err error
}

func (s *scripted) Verify(_ context.Context, _, digest string, p *Profile, _ []PublicKey) (Result, error) {
	a := s.answers[min(s.n, len(s.answers)-1)]
	s.n++
	a.r.Digest, a.r.Profile = digest, p.Name
	return a.r, a.err
}

// brokenStore fails every read and write.
type brokenStore struct{}

func (brokenStore) Get(context.Context, CacheKey) (Entry, bool, error) {
	return Entry{}, false, errors.New("database is locked")
}
func (brokenStore) Put(context.Context, CacheKey, Entry) error {
	return errors.New("database is locked")
}

// An error (a registry that could not be asked) is never kept: the next
// call asks again. A failed result is kept for Recheck, then asked again.
// A store that fails costs verifications, not answers, and is reported.
func TestCachedKeepsNoErrorAndFailedForRecheckOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &Profile{Name: "ci"}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	v := &scripted{answers: []scriptedAnswer{
		{err: errors.New("connection refused")},
		{r: Result{Outcome: Failed, Reason: WrongKey}},
		{r: Result{Outcome: Verified, Signer: "k"}},
	}}
	var storeErrs int
	c := Cached{Verifier: v, Memory: &MemoryCache{}, Store: brokenStore{}, Now: func() time.Time { return now },
		StoreError: func(error) { storeErrs++ }}
	if _, err := c.Verify(ctx, "reg/app", "sha256:a", p, nil); err == nil {
		t.Fatal("the registry's error was not returned")
	}
	r, err := c.Verify(ctx, "reg/app", "sha256:a", p, nil)
	if err != nil || r.Outcome != Failed || v.n != 2 {
		t.Fatalf("after an error: %+v, %v after %d verifications; want failed after 2 (the error not kept)", r, err, v.n)
	}
	now = now.Add(DefaultRecheck - time.Second)
	if r, _ := c.Verify(ctx, "reg/app", "sha256:a", p, nil); r.Outcome != Failed || r.Digest != "sha256:a" || r.Profile != "ci" || v.n != 2 {
		t.Errorf("within the interval: %+v after %d verifications; want the failed kept", r, v.n)
	}
	now = now.Add(time.Second)
	if r, _ := c.Verify(ctx, "reg/app", "sha256:a", p, nil); r.Outcome != Verified || v.n != 3 {
		t.Errorf("after the interval: %+v after %d verifications; want verified after 3", r, v.n)
	}
	if storeErrs == 0 {
		t.Error("the failing store was not reported")
	}
}

// A final entry stays in memory: a check that started before it and
// ends after does not turn it back.
func TestMemoryCacheKeepsFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c MemoryCache
	k := CacheKey{"reg/app", "sha256:a", "ci@1"}
	_ = c.Put(ctx, k, Entry{Result: Result{Outcome: Verified}})
	_ = c.Put(ctx, k, Entry{Result: Result{Outcome: Unsigned}})
	if e, ok, _ := c.Get(ctx, k); !ok || e.Result.Outcome != Verified {
		t.Errorf("Get = %+v, %v; want the verified kept", e, ok)
	}
}

// A person's request (AskAgain) verifies again an unsigned result, so an
// image signed a moment ago is released at once; automation keeps the
// minute; a verified result is final for both.
func TestCachedAskedAgainRechecksUnsigned(t *testing.T) {
	t.Parallel()
	p := &Profile{Name: "ci"}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	v := &scripted{answers: []scriptedAnswer{
		{r: Result{Outcome: Unsigned}},
		{r: Result{Outcome: Verified, Signer: "k"}},
	}}
	c := Cached{Verifier: v, Memory: &MemoryCache{}, Now: func() time.Time { return now }}
	person := AskAgain(context.Background())
	if r, _ := c.Verify(context.Background(), "reg/app", "sha256:a", p, nil); r.Outcome != Unsigned || v.n != 1 {
		t.Fatalf("first: %+v after %d", r, v.n)
	}
	now = now.Add(10 * time.Second)
	if r, _ := c.Verify(context.Background(), "reg/app", "sha256:a", p, nil); r.Outcome != Unsigned || v.n != 1 {
		t.Errorf("automation 12s later: %+v after %d verifications; want the unsigned kept for the minute", r, v.n)
	}
	if r, _ := c.Verify(person, "reg/app", "sha256:a", p, nil); r.Outcome != Verified || v.n != 2 {
		t.Errorf("a person's request 12s later: %+v after %d verifications; want it verified again", r, v.n)
	}
	if r, _ := c.Verify(person, "reg/app", "sha256:a", p, nil); r.Outcome != Verified || v.n != 2 {
		t.Errorf("a person's request after it verified: %+v after %d verifications; want the verified kept", r, v.n)
	}
}
