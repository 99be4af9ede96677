// Package cosigntest signs images in a registry as `cosign sign --key`
// does, for tests: an ECDSA P-256 key pair, and for a digest the
// simple-signing payload sigstore's payload.Cosign writes, signed, pushed
// as one layer of the manifest tagged sha256-HEX.sig, its signature in
// the layer's dev.cosignproject.cosign/signature annotation.
//
// It attests as `cosign attest --key --type T` does: an in-toto statement
// (v0.1, as cosign 2 writes it) naming the digest as its subject, in a
// DSSE envelope signed by the key (sigstore's dsse.WrapSigner), pushed as
// a layer of the manifest tagged sha256-HEX.att beside the attestations
// already there, its predicate type in the layer's predicateType
// annotation.
package cosigntest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cosign's names (its pkg/types.SimpleSigningMediaType and
// pkg/oci/static.SignatureAnnotationKey).
const (
	simpleSigningMediaType  = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation     = "dev.cosignproject.cosign/signature"
	dsseMediaType           = "application/vnd.dsse.envelope.v1+json"
	intotoPayloadType       = "application/vnd.in-toto+json"
	predicateTypeAnnotation = "predicateType"
)

// Predicate types a test attests (cosign attest --type spdxjson,
// cyclonedx, slsaprovenance02, slsaprovenance1).
const (
	SPDX      = "https://spdx.dev/Document"
	CycloneDX = "https://cyclonedx.org/bom"
	SLSAv02   = "https://slsa.dev/provenance/v0.2"
	SLSAv1    = "https://slsa.dev/provenance/v1"
)

// Signer is a cosign key pair.
type Signer struct {
	key *ecdsa.PrivateKey
	sv  *signature.ECDSASignerVerifier
	der []byte
}

// NewSigner generates a key pair.
func NewSigner() (*Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return signerOf(k)
}

// LoadSigner reads a private key as 'cosign generate-key-pair' writes it
// (PEM "ENCRYPTED SIGSTORE PRIVATE KEY", or cosign's older "ENCRYPTED
// COSIGN PRIVATE KEY", encrypted with password), or an unencrypted PEM
// EC private key.
func LoadSigner(path string, password []byte) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return nil, fmt.Errorf("reading the private key %s: %w (a wrong password?)", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the private key %s is a %T; only ECDSA keys (cosign's default) are supported", path, k)
	}
	return signerOf(ec)
}

// WritePrivateKey writes the private half as 'cosign generate-key-pair'
// writes cosign.key: PKCS #8, encrypted with password (scrypt and
// secretbox, sigstore's cryptoutils), PEM "ENCRYPTED SIGSTORE PRIVATE
// KEY".
func (s *Signer) WritePrivateKey(path string, password []byte) error {
	der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(s.key, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: string(cryptoutils.EncryptedSigstorePrivateKeyPEMType), Bytes: der}), 0o600)
}

func signerOf(k *ecdsa.PrivateKey) (*Signer, error) {
	sv, err := signature.LoadECDSASignerVerifier(k, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Signer{key: k, sv: sv, der: der}, nil
}

// ID is the public key's ID as verify names it: sha256: and the hex
// SHA-256 of its DER SubjectPublicKeyInfo.
func (s *Signer) ID() string {
	sum := sha256.Sum256(s.der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WritePublicKey writes the public half as cosign.pub is written (PEM,
// PUBLIC KEY).
func (s *Signer) WritePublicKey(path string) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: s.der}), 0o644)
}

// Sign pushes s's signature of image (repository@digest) under cosign's
// tag for it, replacing any signature there.
func (s *Signer) Sign(image name.Digest, opts ...remote.Option) error {
	pl, err := payload.Cosign{Image: image}.MarshalJSON()
	if err != nil {
		return err
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(pl, simpleSigningMediaType),
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(raw)},
	})
	if err != nil {
		return err
	}
	tag := image.Context().Tag(strings.Replace(image.DigestStr(), ":", "-", 1) + ".sig")
	return remote.Write(tag, img, opts...)
}

// Attest pushes s's attestation of image (repository@digest) with the
// predicate type and predicate (any JSON object; nil is {}), as cosign
// attest --key does: added to cosign's .att tag for the digest, replacing
// an attestation of the same predicate type there (cosign attest
// --replace).
func (s *Signer) Attest(image name.Digest, predicateType string, predicate any, opts ...remote.Option) error {
	st, err := Statement(image, predicateType, predicate)
	if err != nil {
		return err
	}
	env, err := s.Envelope(st)
	if err != nil {
		return err
	}
	return AttachAttestation(image, env, predicateType, opts...)
}

// Statement is the in-toto statement cosign attest writes for image: its
// subject the image's repository and digest.
func Statement(image name.Digest, predicateType string, predicate any) ([]byte, error) {
	if predicate == nil {
		predicate = map[string]any{}
	}
	alg, hex, _ := strings.Cut(image.DigestStr(), ":")
	return json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v0.1",
		"predicateType": predicateType,
		"subject":       []map[string]any{{"name": image.Context().String(), "digest": map[string]string{alg: hex}}},
		"predicate":     predicate,
	})
}

// Envelope signs a statement in a DSSE envelope (the signature over its
// PAE encoding, payload type application/vnd.in-toto+json).
func (s *Signer) Envelope(statement []byte) ([]byte, error) {
	return dsse.WrapSigner(s.sv, intotoPayloadType).SignMessage(bytes.NewReader(statement))
}

// AttachAttestation adds an envelope to the .att tag of image, its
// predicateType annotation set to predicateType, dropping a layer with the
// same annotation (as cosign attest --replace does).
func AttachAttestation(image name.Digest, envelope []byte, predicateType string, opts ...remote.Option) error {
	tag := image.Context().Tag(strings.Replace(image.DigestStr(), ":", "-", 1) + ".att")
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	var keep []mutate.Addendum
	old, err := remote.Image(tag, opts...)
	var te *transport.Error
	switch {
	case err == nil:
		m, err := old.Manifest()
		if err != nil {
			return err
		}
		for _, l := range m.Layers {
			if l.Annotations[predicateTypeAnnotation] == predicateType {
				continue
			}
			layer, err := old.LayerByDigest(l.Digest)
			if err != nil {
				return err
			}
			keep = append(keep, mutate.Addendum{Layer: layer, Annotations: l.Annotations})
		}
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		// No attestation yet.
	default:
		return err
	}
	keep = append(keep, mutate.Addendum{
		Layer:       static.NewLayer(envelope, dsseMediaType),
		Annotations: map[string]string{predicateTypeAnnotation: predicateType},
	})
	var img v1.Image = base
	img, err = mutate.Append(img, keep...)
	if err != nil {
		return err
	}
	return remote.Write(tag, img, opts...)
}
