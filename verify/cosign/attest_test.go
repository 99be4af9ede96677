package cosign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature/dsse"

	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/verify"
)

// envelope is s's DSSE envelope over the in-toto statement cosign attest
// writes for subject.
func (s signer) envelope(t *testing.T, subject name.Digest, predicateType string) []byte {
	t.Helper()
	st, err := cosigntest.Statement(subject, predicateType, map[string]any{"spdxVersion": "SPDX-2.3", "name": "app"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := dsse.WrapSigner(s.sv, IntotoPayloadType).SignMessage(bytes.NewReader(st))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// attest pushes s's attestation of d as cosign attest --key --type does.
func (s signer) attest(t *testing.T, d name.Digest, predicateType string) {
	t.Helper()
	if err := cosigntest.AttachAttestation(d, s.envelope(t, d, predicateType), predicateType); err != nil {
		t.Fatal(err)
	}
}

// Attestations required by predicate type, stored as cosign attest
// stores them, and what fluxd makes of each.
func TestVerifyAttestations(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "/etc/fluxd/ci.pub")
	other := newSigner(t, "/etc/fluxd/other.pub")
	signed := func(tag string) name.Digest {
		d := push(t, repo, tag)
		ci.sign(t, d, d.DigestStr())
		return d
	}

	good := signed("1.0.0")
	ci.attest(t, good, cosigntest.SPDX)

	signed("1.1.0") // no attestation at all

	cdx := signed("1.2.0")
	ci.attest(t, cdx, cosigntest.CycloneDX)

	// 1.3.0's .att tag holds a good SPDX attestation of 1.0.0.
	copied := signed("1.3.0")
	if err := cosigntest.AttachAttestation(copied, ci.envelope(t, good, cosigntest.SPDX), cosigntest.SPDX); err != nil {
		t.Fatal(err)
	}

	byOther := signed("1.4.0")
	other.attest(t, byOther, cosigntest.SPDX)

	// 1.5.0: SPDX and SLSA v1 provenance; 1.6.0: SPDX only.
	several := signed("1.5.0")
	ci.attest(t, several, cosigntest.SPDX)
	ci.attest(t, several, cosigntest.SLSAv1)
	ci.attest(t, signed("1.6.0"), cosigntest.SPDX)

	// 1.7.0's layer is annotated SPDX, but the statement signed inside
	// is CycloneDX: the annotation is not signed, the statement is.
	lying := signed("1.7.0")
	if err := cosigntest.AttachAttestation(lying, ci.envelope(t, lying, cosigntest.CycloneDX), cosigntest.SPDX); err != nil {
		t.Fatal(err)
	}

	// 1.8.0 is attested but not signed: the signature comes first.
	unsigned := push(t, repo, "1.8.0")
	ci.attest(t, unsigned, cosigntest.SPDX)

	// 1.9.0: the SPDX attestation signed with a payload type that is not
	// in-toto's.
	notIntoto := signed("1.9.0")
	st, err := cosigntest.Statement(notIntoto, cosigntest.SPDX, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := dsse.WrapSigner(ci.sv, "text/plain").SignMessage(bytes.NewReader(st))
	if err != nil {
		t.Fatal(err)
	}
	if err := cosigntest.AttachAttestation(notIntoto, env, cosigntest.SPDX); err != nil {
		t.Fatal(err)
	}

	v := New(Config{})
	spdx := []string{cosigntest.SPDX}
	for _, tc := range []struct {
		name     string
		tag      string
		required []string
		want     verify.Outcome
		reason   verify.Reason
		detail   []string
	}{
		{"present and good: verified", "1.0.0", spdx, verify.Verified, "", []string{"attestations " + cosigntest.SPDX + " by key " + ci.pub.ID}},
		{"missing: failed naming the type", "1.1.0", spdx, verify.Failed, verify.MissingAttestation, []string{"no attestation of predicate type " + cosigntest.SPDX, "it has none", "signed by key " + ci.pub.ID}},
		{"another predicate type only: missing", "1.2.0", spdx, verify.Failed, verify.MissingAttestation, []string{"no attestation of predicate type " + cosigntest.SPDX, "it has " + cosigntest.CycloneDX}},
		{"its statement names another digest: digest mismatch", "1.3.0", spdx, verify.Failed, verify.DigestMismatch, []string{good.DigestStr(), "made for another image"}},
		{"signed by another key: wrong key", "1.4.0", spdx, verify.Failed, verify.WrongKey, []string{"none signed by the key(s) of profile"}},
		{"several required, all present: verified", "1.5.0", []string{cosigntest.SPDX, cosigntest.SLSAv1}, verify.Verified, "", []string{cosigntest.SPDX + " by key", cosigntest.SLSAv1 + " by key"}},
		{"several required, one missing: failed naming it", "1.6.0", []string{cosigntest.SPDX, cosigntest.SLSAv1}, verify.Failed, verify.MissingAttestation, []string{"no attestation of predicate type " + cosigntest.SLSAv1}},
		{"an annotation that the signed statement contradicts: missing", "1.7.0", spdx, verify.Failed, verify.MissingAttestation, []string{"no attestation of predicate type " + cosigntest.SPDX, "it has " + cosigntest.CycloneDX}},
		{"attested but unsigned: unsigned", "1.8.0", spdx, verify.Unsigned, "", nil},
		{"a DSSE payload type that is not in-toto's: refused", "1.9.0", spdx, verify.Failed, verify.WrongKey, []string{"unexpected payload type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			digest := resolve(t, repo, tc.tag)
			p := &verify.Profile{Name: "sbom", Keys: []string{"ci.pub"}, Attestations: tc.required}
			got, err := v.Verify(context.Background(), repo.String(), digest, p, []verify.PublicKey{ci.pub})
			if err != nil {
				t.Fatal(err)
			}
			if got.Outcome != tc.want || got.Reason != tc.reason || got.Digest != digest || got.Profile != "sbom" {
				t.Fatalf("%s@%s: got %+v, want %s %s", tc.tag, digest, got, tc.want, tc.reason)
			}
			s := got.String()
			for _, w := range tc.detail {
				if !strings.Contains(s, w) {
					t.Errorf("%q does not say %q", s, w)
				}
			}
			if got.Outcome == verify.Verified && !strings.Contains(got.Signer, "key "+ci.pub.ID) {
				t.Errorf("verified by %q, want the image's signer named", got.Signer)
			}
			t.Log(s)
		})
	}
}

// A digest missing its attestation is checked again once a failed
// result's recheck interval has passed: attested, it verifies.
func TestCachedAttestationMissingThenPresent(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "ci.pub")
	d := push(t, repo, "1.0.0")
	ci.sign(t, d, d.DigestStr())
	now := time.Now()
	v := verify.Cached{Verifier: New(Config{}), Memory: &verify.MemoryCache{}, Now: func() time.Time { return now }}
	p := &verify.Profile{Name: "sbom", Keys: []string{"ci.pub"}, Attestations: []string{cosigntest.SPDX}}
	keys := []verify.PublicKey{ci.pub}
	if r, err := v.Verify(context.Background(), repo.String(), d.DigestStr(), p, keys); err != nil || r.Reason != verify.MissingAttestation {
		t.Fatalf("before the attestation: %+v, %v; want failed, missing-attestation", r, err)
	}
	// Without the attestation requirement the same digest verifies: the
	// cache keeps it under that profile, not under p.
	if r, err := v.Verify(context.Background(), repo.String(), d.DigestStr(), &verify.Profile{Name: "sbom", Keys: []string{"ci.pub"}}, keys); err != nil || r.Outcome != verify.Verified {
		t.Fatalf("signature only: %+v, %v", r, err)
	}
	now = now.Add(verify.DefaultRecheck + time.Second)
	if r, err := v.Verify(context.Background(), repo.String(), d.DigestStr(), p, keys); err != nil || r.Reason != verify.MissingAttestation {
		t.Fatalf("a verified signature-only result answered for a profile requiring attestations: %+v, %v", r, err)
	}
	ci.attest(t, d, cosigntest.SPDX)
	now = now.Add(verify.DefaultRecheck + time.Second)
	if r, err := v.Verify(context.Background(), repo.String(), d.DigestStr(), p, keys); err != nil || r.Outcome != verify.Verified {
		t.Fatalf("after the attestation: %+v, %v; want verified", r, err)
	}
}

// A profile requiring attestations with no key to check them by (a
// keyless one) gives no verdict: attestations are verified with keys only.
func TestVerifyAttestationsNeedKeys(t *testing.T) {
	t.Parallel()
	if _, err := KeyEnvelopes(nil); err == nil {
		t.Fatal("an envelope check with no key")
	}
}

// cosign attest --registry-referrers-mode=oci-1-1 stores the envelopes
// in a referrer of artifact type application/vnd.in-toto+json, with no
// .att tag. Only the digest's own referrers count.
func TestVerifyAttestationsFromReferrers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/team/app")
	if err != nil {
		t.Fatal(err)
	}
	ci := newSigner(t, "ci.pub")
	attested := push(t, repo, "1.0.0")
	ci.sign(t, attested, attested.DigestStr())
	bare := push(t, repo, "1.1.0")
	ci.sign(t, bare, bare.DigestStr())

	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(ci.envelope(t, attested, cosigntest.SPDX), DSSEMediaType),
		Annotations: map[string]string{PredicateTypeAnnotation: cosigntest.SPDX},
	})
	if err != nil {
		t.Fatal(err)
	}
	// go-containerregistry's registry reports a referrer's config media
	// type as its artifact type.
	img = mutate.ConfigMediaType(img, IntotoArtifactType)
	desc, err := remote.Head(attested)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Digest(h.String()), img); err != nil {
		t.Fatal(err)
	}
	withSubject := mutate.Subject(img, *desc)
	raw, err := withSubject.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if err := remote.Put(repo.Digest("sha256:"+hex.EncodeToString(sum[:])), withSubject.(remote.Taggable)); err != nil {
		t.Fatal(err)
	}

	v := New(Config{})
	p := &verify.Profile{Name: "sbom", Keys: []string{"ci.pub"}, Attestations: []string{cosigntest.SPDX}}
	got, err := v.Verify(context.Background(), repo.String(), attested.DigestStr(), p, []verify.PublicKey{ci.pub})
	if err != nil || got.Outcome != verify.Verified {
		t.Fatalf("attested as a referrer: %+v, %v; want verified", got, err)
	}
	got, err = v.Verify(context.Background(), repo.String(), bare.DigestStr(), p, []verify.PublicKey{ci.pub})
	if err != nil || got.Reason != verify.MissingAttestation {
		t.Fatalf("another digest's referrer counted: %+v, %v; want missing-attestation", got, err)
	}
	if _, err := remote.Head(repo.Tag(attTag(attested.DigestStr()))); err == nil {
		t.Fatal("the test pushed a .att tag: the referrers path is not what was tested")
	}
}
