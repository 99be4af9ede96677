package cosign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/verify"
)

// signer is a cosign key pair: the private half signs as cosign sign
// does, the public half is what a profile names.
type signer struct {
	sv  *signature.ECDSASignerVerifier
	pub verify.PublicKey
}

func newSigner(t *testing.T, path string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(k, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return signer{sv, verify.PublicKey{Path: path, ID: "sha256:" + hex.EncodeToString(sum[:]), Key: &k.PublicKey}}
}

// signatureImage is the manifest cosign sign pushes for d: one
// simple-signing layer, the payload sigstore's payload.Cosign writes for
// d, its signature by s in the layer's annotation.
func (s signer) signatureImage(t *testing.T, d name.Digest) v1.Image {
	t.Helper()
	pl, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(pl))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(pl, SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(raw)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sign pushes s's signature of d under cosign's tag for digest (d's own,
// unless a test copies it elsewhere).
func (s signer) sign(t *testing.T, d name.Digest, digest string) {
	t.Helper()
	if err := remote.Write(d.Context().Tag(sigTag(digest)), s.signatureImage(t, d)); err != nil {
		t.Fatal(err)
	}
}

// push pushes a random image under tag and returns its digest.
func push(t *testing.T, repo name.Repository, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(tag), img); err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return repo.Digest(h.String())
}

func testRegistry(t *testing.T) name.Repository {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/team/app")
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// resolve is the digest a tag names now, as a plan would read it.
func resolve(t *testing.T, repo name.Repository, tag string) string {
	t.Helper()
	desc, err := remote.Head(repo.Tag(tag))
	if err != nil {
		t.Fatal(err)
	}
	return desc.Digest.String()
}

// The outcomes cosign verify gives for these, as fluxd reports them.
func TestVerifyKeys(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "/etc/fluxd/ci.pub")
	other := newSigner(t, "/etc/fluxd/other.pub")
	v := New(Config{})
	ctx := context.Background()

	signed := push(t, repo, "1.0.0")
	ci.sign(t, signed, signed.DigestStr())

	byOther := push(t, repo, "1.1.0")
	other.sign(t, byOther, byOther.DigestStr())

	// 1.2.0 was signed, then the tag moved to an unsigned image.
	first := push(t, repo, "1.2.0")
	ci.sign(t, first, first.DigestStr())
	push(t, repo, "1.2.0")

	// 1.3.0's signature tag holds a good signature copied from 1.0.0.
	copied := push(t, repo, "1.3.0")
	ci.sign(t, signed, copied.DigestStr())

	push(t, repo, "1.4.0")

	// 1.5.0 is signed by both keys: one of the profile's is enough.
	both := push(t, repo, "1.5.0")
	both1 := other.signatureImage(t, both)
	both2 := ci.signatureImage(t, both)
	l2, err := both2.Layers()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := both2.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	twoSigs, err := mutate.Append(both1, mutate.Addendum{Layer: l2[0], Annotations: m2.Layers[0].Annotations})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(sigTag(both.DigestStr())), twoSigs); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		tag    string
		keys   []verify.PublicKey
		want   verify.Outcome
		reason verify.Reason
		signer string
	}{
		{"signed by the profile's key: verified", "1.0.0", []verify.PublicKey{ci.pub}, verify.Verified, "", ci.pub.ID},
		{"the profile's second key: verified by it", "1.0.0", []verify.PublicKey{other.pub, ci.pub}, verify.Verified, "", ci.pub.ID},
		{"signed by another key: failed", "1.1.0", []verify.PublicKey{ci.pub}, verify.Failed, verify.WrongKey, ""},
		{"tag moved to an unsigned digest after signing: unsigned", "1.2.0", []verify.PublicKey{ci.pub}, verify.Unsigned, "", ""},
		{"a good signature copied from another digest: failed", "1.3.0", []verify.PublicKey{ci.pub}, verify.Failed, verify.DigestMismatch, ""},
		{"no signature: unsigned", "1.4.0", []verify.PublicKey{ci.pub}, verify.Unsigned, "", ""},
		{"signed by two keys, one the profile's: verified", "1.5.0", []verify.PublicKey{ci.pub}, verify.Verified, "", ci.pub.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			digest := resolve(t, repo, tc.tag)
			got, err := v.VerifyKeys(ctx, repo.String(), digest, "signed", tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if got.Outcome != tc.want || got.Reason != tc.reason || got.Digest != digest || got.Profile != "signed" {
				t.Fatalf("%s@%s: got %+v, want %s %s", tc.tag, digest, got, tc.want, tc.reason)
			}
			if tc.signer != "" && !strings.Contains(got.Signer, tc.signer) {
				t.Errorf("signer %q, want key %s", got.Signer, tc.signer)
			}
			if got.Outcome != verify.Verified && got.Detail == "" {
				t.Errorf("%s without a word why", got.Outcome)
			}
			t.Log(got)
		})
	}
}

// The old digest of a moved tag stays verified: a plan that pinned it
// releases what was signed.
func TestVerifyKeysByDigestNotTag(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "ci.pub")
	first := push(t, repo, "1.2.0")
	ci.sign(t, first, first.DigestStr())
	push(t, repo, "1.2.0")
	got, err := New(Config{}).VerifyKeys(context.Background(), repo.String(), first.DigestStr(), "signed", []verify.PublicKey{ci.pub})
	if err != nil || got.Outcome != verify.Verified {
		t.Fatalf("the signed digest: %+v, %v; want verified", got, err)
	}
}

// A signature annotation that is not one: failed, malformed, not a panic.
func TestVerifyKeysMalformed(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "ci.pub")
	d := push(t, repo, "1.0.0")
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer([]byte(`{"critical":{}}`), SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotation: "not base64!"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(sigTag(d.DigestStr())), img); err != nil {
		t.Fatal(err)
	}
	got, err := New(Config{}).VerifyKeys(context.Background(), repo.String(), d.DigestStr(), "signed", []verify.PublicKey{ci.pub})
	if err != nil || got.Outcome != verify.Failed || got.Reason != verify.Malformed {
		t.Fatalf("got %+v, %v; want failed, malformed", got, err)
	}
}

// A registry that cannot be asked is an error, never "unsigned".
func TestVerifyKeysRegistryDown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	ci := newSigner(t, "ci.pub")
	digest := "sha256:" + strings.Repeat("a", 64)
	got, err := New(Config{}).VerifyKeys(context.Background(), host+"/team/app", digest, "signed", []verify.PublicKey{ci.pub})
	if err == nil {
		t.Fatalf("got %+v and no error from a registry that is down", got)
	}
	if got.Outcome != "" {
		t.Errorf("a verdict (%s) from a registry that is down", got.Outcome)
	}
}

// counting counts the requests a verifier makes.
type counting struct {
	n atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// A verified digest is verified once: the second plan asks the cache, not
// the registry. An unsigned one is asked again once verify.DefaultRecheck
// has passed, for cosign signs after the push.
func TestCachedVerifiesADigestOnce(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ci := newSigner(t, "ci.pub")
	signed := push(t, repo, "1.0.0")
	ci.sign(t, signed, signed.DigestStr())
	unsigned := push(t, repo, "1.1.0")

	tr := &counting{}
	now := time.Now()
	v := verify.Cached{Verifier: New(Config{Transport: tr}), Memory: &verify.MemoryCache{}, Now: func() time.Time { return now }}
	p := &verify.Profile{Name: "signed", Keys: []string{"ci.pub"}}
	keys := []verify.PublicKey{ci.pub}
	ctx := context.Background()
	for i := range 2 {
		r, err := v.Verify(ctx, repo.String(), signed.DigestStr(), p, keys)
		if err != nil || r.Outcome != verify.Verified {
			t.Fatalf("round %d: %+v, %v", i, r, err)
		}
	}
	first := tr.n.Load()
	if first == 0 {
		t.Fatal("no request was made")
	}
	r, err := v.Verify(ctx, repo.String(), signed.DigestStr(), p, keys)
	if err != nil || r.Outcome != verify.Verified || tr.n.Load() != first {
		t.Errorf("a third verification of a verified digest made %d requests (%+v, %v)", tr.n.Load()-first, r, err)
	}

	for i := range 2 {
		if r, err := v.Verify(ctx, repo.String(), unsigned.DigestStr(), p, keys); err != nil || r.Outcome != verify.Unsigned {
			t.Fatalf("round %d: %+v, %v", i, r, err)
		}
	}
	ci.sign(t, unsigned, unsigned.DigestStr())
	if r, err := v.Verify(ctx, repo.String(), unsigned.DigestStr(), p, keys); err != nil || r.Outcome != verify.Unsigned {
		t.Errorf("signed within a minute of a first look: %+v, %v; want the unsigned kept that long", r, err)
	}
	now = now.Add(verify.DefaultRecheck)
	if r, err := v.Verify(ctx, repo.String(), unsigned.DigestStr(), p, keys); err != nil || r.Outcome != verify.Verified {
		t.Errorf("signed after a first look: %+v, %v; want verified, not a cached unsigned", r, err)
	}

	// Another key for the profile is another profile: checked again.
	other := newSigner(t, "other.pub")
	before := tr.n.Load()
	if r, _ := v.Verify(ctx, repo.String(), signed.DigestStr(), p, []verify.PublicKey{other.pub}); r.Outcome != verify.Failed {
		t.Errorf("the cache answered for a profile with another key: %+v", r)
	}
	if tr.n.Load() == before {
		t.Errorf("no request for a profile whose key changed")
	}
}

// What is not built gives no verdict, never a pass: attestations on a
// profile with no key to check them by (a keyless one: attestations are
// checked with keys only), once its keyless signature verified.
func TestVerifyRefusesWhatIsNotBuilt(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ca := newCA(t)
	signed := push(t, repo, "1.0.0")
	if err := ca.SignKeyless(signed, cosigntest.Keyless{Issuer: github, Subject: workflow}); err != nil {
		t.Fatal(err)
	}
	p := keylessProfile(t, ca, verify.TlogRequired, verify.Identity{Issuer: github, Subject: workflow})
	if r, err := New(Config{}).Verify(context.Background(), repo.String(), signed.DigestStr(), p, nil); err != nil || r.Outcome != verify.Verified {
		t.Fatalf("the keyless signature alone: %s, %v; want verified", r, err)
	}
	p.Attestations = []string{"https://slsa.dev/provenance/v1"}
	r, err := New(Config{}).Verify(context.Background(), repo.String(), signed.DigestStr(), p, nil)
	if !errors.Is(err, verify.ErrNotBuilt) || r.Outcome == verify.Verified {
		t.Errorf("profile %s: %+v, %v; want verify.ErrNotBuilt and no verdict", p.Name, r, err)
	}
}

// cosign sign --registry-referrers-mode=oci-1-1 stores the signature as a
// referrer of the image (config media type and artifact type
// application/vnd.dev.cosign.artifact.sig.v1+json, a subject), with no
// sha256-HEX.sig tag. Only the referrers of the digest count.
func TestVerifyKeysFromReferrers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/team/app")
	if err != nil {
		t.Fatal(err)
	}
	ci := newSigner(t, "ci.pub")
	signed := push(t, repo, "1.0.0")
	unsigned := push(t, repo, "1.1.0")
	refer(t, signed, ci.signatureImage(t, signed))

	v := New(Config{})
	got, err := v.VerifyKeys(context.Background(), repo.String(), signed.DigestStr(), "signed", []verify.PublicKey{ci.pub})
	if err != nil || got.Outcome != verify.Verified {
		t.Fatalf("signed as a referrer: %+v, %v; want verified", got, err)
	}
	got, err = v.VerifyKeys(context.Background(), repo.String(), unsigned.DigestStr(), "signed", []verify.PublicKey{ci.pub})
	if err != nil || got.Outcome != verify.Unsigned {
		t.Fatalf("another digest's referrer counted: %+v, %v; want unsigned", got, err)
	}
	if _, err := remote.Head(repo.Tag(sigTag(signed.DigestStr()))); err == nil {
		t.Fatal("the test pushed a .sig tag: the referrers path is not what was tested")
	}
}

// refer pushes a signature manifest as cosign sign
// --registry-referrers-mode=oci-1-1 does: as a referrer of subject, with
// no sha256-HEX.sig tag.
func refer(t *testing.T, subject name.Digest, sigImage v1.Image) {
	t.Helper()
	img := mutate.ConfigMediaType(sigImage, SignatureArtifactType)
	desc, err := remote.Head(subject)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	// The blobs first, then the manifest with its subject.
	if err := remote.Write(subject.Context().Digest(h.String()), img); err != nil {
		t.Fatal(err)
	}
	withSubject := mutate.Subject(img, *desc)
	raw, err := withSubject.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if err := remote.Put(subject.Context().Digest("sha256:"+hex.EncodeToString(sum[:])), withSubject.(remote.Taggable)); err != nil {
		t.Fatal(err)
	}
}
