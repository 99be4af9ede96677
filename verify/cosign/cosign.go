package cosign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/fluxd/fluxd/verify"
)

// cosign's names for what it stores beside an image (cosign's
// pkg/types.SimpleSigningMediaType, pkg/oci/static.SignatureAnnotationKey,
// and the artifact type of its OCI 1.1 signatures).
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation    = "dev.cosignproject.cosign/signature"
	SignatureArtifactType  = "application/vnd.dev.cosign.artifact.sig.v1+json"
	// A keyless signature's layer carries its certificate (PEM), the
	// chain that issued it (PEM), and the Rekor bundle of its log entry
	// (cosign's pkg/oci/static CertificateAnnotationKey,
	// ChainAnnotationKey, BundleAnnotationKey).
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	ChainAnnotation       = "dev.sigstore.cosign/chain"
	BundleAnnotation      = "dev.sigstore.cosign/bundle"
)

// maxPayload bounds a signature payload read: cosign's are a few hundred
// bytes.
const maxPayload = 1 << 20

// maxSignatures bounds the signatures checked for one digest: each is a
// blob fetched and a check per key.
const maxSignatures = 64

// Config is how the verifier reaches registries.
type Config struct {
	// Transport carries every request (default http.DefaultTransport):
	// the registry adapter's, so that its rate limits and metrics count
	// the signature lookups too.
	Transport http.RoundTripper
	// Keychain finds credentials (default: none, anonymous).
	Keychain authn.Keychain
}

// Verifier checks cosign signatures in registries.
type Verifier struct {
	opts  []remote.Option
	roots roots
}

// New returns a verifier.
func New(cfg Config) *Verifier {
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	kc := cfg.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain()
	}
	return &Verifier{opts: []remote.Option{remote.WithTransport(tr), remote.WithAuthFromKeychain(kc)}}
}

var _ verify.Verifier = (*Verifier)(nil)

// Verify checks the digest against a profile's keys and keyless
// identities (keyless.go), then the attestations the profile requires
// (attest.go, checked with its keys).
func (v *Verifier) Verify(ctx context.Context, repository, digest string, p *verify.Profile, keys []verify.PublicKey) (verify.Result, error) {
	var res verify.Result
	var err error
	if len(p.Keyless) > 0 {
		res, err = v.verifySigners(ctx, repository, digest, p, keys)
	} else {
		res, err = v.VerifyKeys(ctx, repository, digest, p.Name, keys)
	}
	return v.attested(ctx, res, err, repository, p, keys)
}

// VerifyKeys checks the digest's (sha256:...) cosign signatures in
// repository against the profile's public keys. Unsigned: no signature
// at all. Failed: signatures, none good by these keys over this digest.
// An error is a registry that could not be asked, not a verdict.
func (v *Verifier) VerifyKeys(ctx context.Context, repository, digest string, profile string, keys []verify.PublicKey) (verify.Result, error) {
	res := verify.Result{Digest: digest, Profile: profile}
	d, err := name.NewDigest(repository+"@"+digest, name.WeakValidation)
	if err != nil {
		return res, fmt.Errorf("verifying %s@%s: %w", repository, digest, err)
	}
	if len(keys) == 0 {
		return res, fmt.Errorf("verifying %s: profile %q has no public key", d, profile)
	}
	sigs, err := v.read(ctx, d)
	if err != nil {
		return res, err
	}
	if len(sigs) == 0 {
		return unsigned(res), nil
	}
	return checkKeys(ctx, res, sigs, keys)
}

// read reads the digest's signatures.
func (v *Verifier) read(ctx context.Context, d name.Digest) ([]sig, error) {
	opts := append([]remote.Option{remote.WithContext(ctx)}, v.opts...)
	sigs, err := signatures(d, opts)
	if err != nil {
		return nil, fmt.Errorf("reading the signatures of %s: %w", d, err)
	}
	return sigs, nil
}

func unsigned(res verify.Result) verify.Result {
	res.Outcome, res.Detail = verify.Unsigned, fmt.Sprintf("no cosign signature for %s (no tag %s, no referrer)", res.Digest, sigTag(res.Digest))
	return res
}

// checkKeys is the verdict of the profile's keys over sigs.
func checkKeys(ctx context.Context, res verify.Result, sigs []sig, keys []verify.PublicKey) (verify.Result, error) {
	digest, profile := res.Digest, res.Profile
	var err error
	verifiers := make([]signature.Verifier, len(keys))
	for i, k := range keys {
		if verifiers[i], err = signature.LoadVerifier(k.Key, crypto.SHA256); err != nil {
			return res, fmt.Errorf("key %s (%s): %w", k.ID, k.Path, err)
		}
	}

	var mismatch, malformed []string
	for _, s := range sigs {
		raw, err := base64.StdEncoding.DecodeString(s.b64)
		if err != nil {
			malformed = append(malformed, "a signature annotation that is not base64")
			continue
		}
		for i, ver := range verifiers {
			if ver.VerifySignature(bytes.NewReader(raw), bytes.NewReader(s.payload), options.WithContext(ctx)) != nil {
				continue
			}
			var p payload.Cosign
			if err := p.UnmarshalJSON(s.payload); err != nil {
				malformed = append(malformed, fmt.Sprintf("a payload signed by %s that is not cosign's: %v", keys[i].ID, err))
				continue
			}
			if got := p.Image.DigestStr(); got != digest {
				mismatch = append(mismatch, fmt.Sprintf("a signature by %s over %s", keys[i].ID, got))
				continue
			}
			res.Outcome, res.Signer = verify.Verified, fmt.Sprintf("key %s (%s)", keys[i].ID, keys[i].Path)
			return res, nil
		}
	}
	res.Outcome = verify.Failed
	switch {
	case len(mismatch) > 0:
		res.Reason = verify.DigestMismatch
		res.Detail = fmt.Sprintf("%s is stored as the signature of %s: it was made for another image and copied, or the tag was moved", strings.Join(mismatch, "; "), digest)
	case len(malformed) > 0:
		res.Reason = verify.Malformed
		res.Detail = strings.Join(malformed, "; ")
	default:
		res.Reason = verify.WrongKey
		res.Detail = fmt.Sprintf("%d signature(s), none by the key(s) of profile %q (%s): signed by someone else, or with another key", len(sigs), profile, keyIDs(keys))
	}
	return res, nil
}

// sig is one cosign signature: its base64 annotation and its payload,
// and for a keyless one its certificate and Rekor bundle annotations
// (empty for a key's). The chain annotation is not read: a certificate
// chains through the trusted root's intermediates.
type sig struct {
	b64     string
	payload []byte

	cert, bundle string
}

// signatures reads the digest's signatures: from cosign's tag, else from
// its referrers.
func signatures(d name.Digest, opts []remote.Option) ([]sig, error) {
	return artifacts(d, sigTag(d.DigestStr()), SignatureArtifactType, opts, func(img v1.Image, out []sig) ([]sig, error) {
		s, err := layers(img)
		return append(out, s...), err
	})
}

// artifacts reads what cosign keeps beside digest d, with read (which
// appends one manifest's layers to out): the manifest cosign tagged tag,
// or, where that tag is missing, the digest's OCI 1.1 referrers of
// artifactType, up to maxSignatures layers. Signatures and attestations
// are both kept so.
func artifacts[T any](d name.Digest, tag, artifactType string, opts []remote.Option, read func(v1.Image, []T) ([]T, error)) ([]T, error) {
	img, err := remote.Image(d.Context().Tag(tag), opts...)
	switch {
	case err == nil:
		return read(img, nil)
	case !notFound(err):
		return nil, err
	}
	idx, err := remote.Referrers(d, append(opts, remote.WithFilter("artifactType", artifactType))...)
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []T
	for _, m := range im.Manifests {
		if m.ArtifactType != artifactType {
			continue
		}
		img, err := remote.Image(d.Context().Digest(m.Digest.String()), opts...)
		if err != nil {
			return nil, err
		}
		if out, err = read(img, out); err != nil {
			return nil, err
		}
		if len(out) >= maxSignatures {
			break
		}
	}
	return out, nil
}

// layers reads the simple-signing layers of a signature manifest.
func layers(img v1.Image) ([]sig, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	var out []sig
	for _, l := range m.Layers {
		if l.MediaType != types.MediaType(SimpleSigningMediaType) {
			continue
		}
		if len(out) == maxSignatures {
			break
		}
		b64, ok := l.Annotations[SignatureAnnotation]
		if !ok {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, err
		}
		p, err := readPayload(layer)
		if err != nil {
			return nil, fmt.Errorf("signature payload %s: %w", l.Digest, err)
		}
		out = append(out, sig{b64: b64, payload: p, cert: l.Annotations[CertificateAnnotation], bundle: l.Annotations[BundleAnnotation]})
	}
	return out, nil
}

// readPayload reads a payload whole: go-containerregistry checks its
// digest at the end, so what is verified is what the manifest names.
func readPayload(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	p, err := io.ReadAll(io.LimitReader(rc, maxPayload+1))
	if err != nil {
		return nil, err
	}
	if len(p) > maxPayload {
		return nil, fmt.Errorf("more than %d bytes: not a cosign payload", maxPayload)
	}
	return p, nil
}

// sigTag is cosign's tag for a digest's signature: sha256-HEX.sig.
func sigTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".sig"
}

func notFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, e := range te.Errors {
		switch e.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return true
		}
	}
	return false
}

func keyIDs(keys []verify.PublicKey) string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return strings.Join(ids, ", ")
}
