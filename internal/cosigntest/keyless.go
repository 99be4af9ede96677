package cosigntest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/rekor/pkg/generated/models"
	rekortypes "github.com/sigstore/rekor/pkg/types"
	hashedrekord "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cosign's annotations of a keyless signature's layer (its
// pkg/oci/static CertificateAnnotationKey, ChainAnnotationKey and
// BundleAnnotationKey).
const (
	certificateAnnotation = "dev.sigstore.cosign/certificate"
	chainAnnotation       = "dev.sigstore.cosign/chain"
	bundleAnnotation      = "dev.sigstore.cosign/bundle"
)

// CA is a test Fulcio and Rekor, as the local stack and tests need them
// to sign keyless: a root CA and an intermediate that issue short-lived
// code-signing certificates for an OIDC identity (the issuer in Fulcio's
// extensions, the subject as the SAN), and a transparency log's key that
// signs each signature's entry (the signed entry timestamp cosign keeps
// in its bundle annotation). Its trusted root (TrustedRootJSON) names the
// CA and the log as Sigstore's trusted_root.json does.
type CA struct {
	root, intermediate *x509.Certificate
	key                *ecdsa.PrivateKey // the intermediate's
	log                *ecdsa.PrivateKey
	logID              []byte
	start              time.Time
	index              int64
}

// NewCA makes a root and an intermediate valid from an hour ago for a
// year, and a log key.
func NewCA() (*CA, error) {
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	rootCert, err := issue(&x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"fluxd test"}, CommonName: "fluxd test fulcio root"},
		NotBefore:             start,
		NotAfter:              start.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}, nil, rootKey, &rootKey.PublicKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	inter, err := issue(&x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"fluxd test"}, CommonName: "fluxd test fulcio intermediate"},
		NotBefore:             start,
		NotAfter:              start.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, rootCert, rootKey, &key.PublicKey)
	if err != nil {
		return nil, err
	}
	logKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&logKey.PublicKey)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(der)
	return &CA{root: rootCert, intermediate: inter, key: key, log: logKey, logID: id[:], start: start}, nil
}

// LogTo logs ca's signatures in o's log from now on, as a certificate
// from any CA can be logged in the public Rekor: what o's trusted root
// trusts is its log, not ca.
func (ca *CA) LogTo(o *CA) {
	ca.log, ca.logID = o.log, o.logID
}

// TrustedRootJSON is the trusted root that names the CA (root and
// intermediate) and the log, as trusted_root.json
// (application/vnd.dev.sigstore.trustedroot+json;version=0.1).
func (ca *CA) TrustedRootJSON() ([]byte, error) {
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{
			Root: ca.root, Intermediates: []*x509.Certificate{ca.intermediate},
			ValidityPeriodStart: ca.start, URI: "https://fulcio.fluxd.test",
		}},
		nil, nil,
		map[string]*root.TransparencyLog{hex.EncodeToString(ca.logID): {
			BaseURL: "https://rekor.fluxd.test", ID: ca.logID, ValidityPeriodStart: ca.start,
			HashFunc: crypto.SHA256, PublicKey: &ca.log.PublicKey, SignatureHashFunc: crypto.SHA256,
		}})
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// WriteTrustedRoot writes TrustedRootJSON to path.
func (ca *CA) WriteTrustedRoot(path string) error {
	data, err := ca.TrustedRootJSON()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Keyless is one keyless signing: who signs, and what a test may vary.
type Keyless struct {
	// Issuer is the OIDC issuer that vouched for the subject
	// (https://token.actions.githubusercontent.com).
	Issuer string
	// Subject is the certificate's identity: an e-mail (with an @) or a
	// URI (a workflow's).
	Subject string
	// NotBefore and NotAfter bound the certificate (default: from a
	// minute ago for ten minutes, as Fulcio's).
	NotBefore, NotAfter time.Time
	// LoggedAt is the log entry's integrated time (default: now).
	LoggedAt time.Time
	// NoLog signs without a log entry, as cosign sign --tlog-upload=false.
	NoLog bool
	// For is the image the payload names (default: the image signed):
	// another digest makes a signature copied beside the wrong image.
	For name.Digest
	// ExtKeyUsage is the certificate's (default: code signing, as
	// Fulcio's).
	ExtKeyUsage []x509.ExtKeyUsage
}

// SignKeyless pushes a keyless signature of image under cosign's tag for
// it, replacing any signature there: an ephemeral key, a certificate for
// k's identity, the payload signed with it, and the log's bundle.
func (ca *CA) SignKeyless(image name.Digest, k Keyless, opts ...remote.Option) error {
	add, err := ca.Signature(image, k)
	if err != nil {
		return err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), add)
	if err != nil {
		return err
	}
	tag := image.Context().Tag(strings.Replace(image.DigestStr(), ":", "-", 1) + ".sig")
	return remote.Write(tag, img, opts...)
}

// Signature is the layer SignKeyless pushes, with its annotations.
func (ca *CA) Signature(image name.Digest, k Keyless) (mutate.Addendum, error) {
	now := time.Now()
	if k.NotBefore.IsZero() {
		k.NotBefore = now.Add(-time.Minute)
	}
	if k.NotAfter.IsZero() {
		k.NotAfter = k.NotBefore.Add(10 * time.Minute)
	}
	if k.LoggedAt.IsZero() {
		k.LoggedAt = now
	}
	if k.For.DigestStr() == "" {
		k.For = image
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return mutate.Addendum{}, err
	}
	leaf, err := ca.leaf(k, &key.PublicKey)
	if err != nil {
		return mutate.Addendum{}, err
	}
	pl, err := payload.Cosign{Image: k.For}.MarshalJSON()
	if err != nil {
		return mutate.Addendum{}, err
	}
	sv, err := signature.LoadECDSASignerVerifier(key, crypto.SHA256)
	if err != nil {
		return mutate.Addendum{}, err
	}
	raw, err := sv.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return mutate.Addendum{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{ca.intermediate, ca.root})
	if err != nil {
		return mutate.Addendum{}, err
	}
	ann := map[string]string{
		signatureAnnotation:   base64.StdEncoding.EncodeToString(raw),
		certificateAnnotation: string(certPEM),
		chainAnnotation:       string(chainPEM),
	}
	if !k.NoLog {
		b, err := ca.bundle(pl, raw, certPEM, k.LoggedAt)
		if err != nil {
			return mutate.Addendum{}, err
		}
		ann[bundleAnnotation] = b
	}
	return mutate.Addendum{Layer: static.NewLayer(pl, simpleSigningMediaType), Annotations: ann}, nil
}

// leaf issues a Fulcio-like certificate: code signing, the subject as its
// only SAN, the OIDC issuer in Fulcio's extensions (1.3.6.1.4.1.57264.1.1,
// raw, and .1.8, a UTF8String).
func (ca *CA) leaf(k Keyless, pub *ecdsa.PublicKey) (*x509.Certificate, error) {
	if k.ExtKeyUsage == nil {
		k.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
	}
	v2, err := asn1.MarshalWithParams(k.Issuer, "utf8")
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		NotBefore:   k.NotBefore,
		NotAfter:    k.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: k.ExtKeyUsage,
		ExtraExtensions: []pkix.Extension{
			{Id: certificate.OIDIssuer, Value: []byte(k.Issuer)},
			{Id: certificate.OIDIssuerV2, Value: v2},
		},
	}
	if strings.Contains(k.Subject, "@") && !strings.Contains(k.Subject, "://") {
		tmpl.EmailAddresses = []string{k.Subject}
	} else {
		u, err := url.Parse(k.Subject)
		if err != nil {
			return nil, fmt.Errorf("subject %q is neither an e-mail nor a URI: %w", k.Subject, err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	return issue(tmpl, ca.intermediate, ca.key, pub)
}

// bundle logs the signature: a hashedrekord entry as Rekor canonicalizes
// it, and the log's signed entry timestamp over it, in cosign's bundle
// annotation (its pkg/cosign/bundle RekorBundle).
func (ca *CA) bundle(pl, sig, certPEM []byte, at time.Time) (string, error) {
	sum := sha256.Sum256(pl)
	entry := &hashedrekord.V001Entry{HashedRekordObj: models.HashedrekordV001Schema{
		Data: &models.HashedrekordV001SchemaData{Hash: &models.HashedrekordV001SchemaDataHash{
			Algorithm: ptr(models.HashedrekordV001SchemaDataHashAlgorithmSha256), Value: ptr(hex.EncodeToString(sum[:])),
		}},
		Signature: &models.HashedrekordV001SchemaSignature{
			Content:   sig,
			PublicKey: &models.HashedrekordV001SchemaSignaturePublicKey{Content: certPEM},
		},
	}}
	body, err := rekortypes.CanonicalizeEntry(context.Background(), entry)
	if err != nil {
		return "", fmt.Errorf("the log entry: %w", err)
	}
	ca.index++
	p := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(body),
		IntegratedTime: at.Unix(),
		LogIndex:       ca.index,
		LogID:          hex.EncodeToString(ca.logID),
	}
	js, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	canon, err := jsoncanonicalizer.Transform(js)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(canon)
	set, err := ecdsa.SignASN1(rand.Reader, ca.log, h[:])
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(struct {
		SignedEntryTimestamp []byte
		Payload              tlog.RekorPayload
	}{set, p})
	return string(out), err
}

func issue(tmpl, parent *x509.Certificate, signer *ecdsa.PrivateKey, pub *ecdsa.PublicKey) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func ptr[T any](v T) *T { return &v }
