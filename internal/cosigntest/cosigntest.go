// Package cosigntest signs images in a registry as `cosign sign --key`
// does, for tests: an ECDSA P-256 key pair, and for a digest the
// simple-signing payload sigstore's payload.Cosign writes, signed, pushed
// as one layer of the manifest tagged sha256-HEX.sig, its signature in
// the layer's dev.cosignproject.cosign/signature annotation.
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
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cosign's names (its pkg/types.SimpleSigningMediaType and
// pkg/oci/static.SignatureAnnotationKey).
const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
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
