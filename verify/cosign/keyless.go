package cosign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/fluxd/fluxd/verify"
)

// verifySigners checks the digest against a profile that names keyless
// identities, and perhaps keys too: one good signature by either is
// enough. When none is, the keyless verdict speaks for signatures made
// with a certificate, the keys' for those made with a key.
func (v *Verifier) verifySigners(ctx context.Context, repository, digest string, p *verify.Profile, keys []verify.PublicKey) (verify.Result, error) {
	res := verify.Result{Digest: digest, Profile: p.Name}
	d, err := name.NewDigest(repository+"@"+digest, name.WeakValidation)
	if err != nil {
		return res, fmt.Errorf("verifying %s@%s: %w", repository, digest, err)
	}
	tr, err := v.trustedRoot(p)
	if err != nil {
		return res, err
	}
	ids, err := identities(p)
	if err != nil {
		return res, err
	}
	sigs, err := v.read(ctx, d)
	if err != nil {
		return res, err
	}
	if len(sigs) == 0 {
		return unsigned(res), nil
	}
	var byKey verify.Result
	if len(keys) > 0 {
		if byKey, err = checkKeys(ctx, res, sigs, keys); err != nil || byKey.Outcome == verify.Verified {
			return byKey, err
		}
	}
	byCert, certs := checkKeyless(res, sigs, p, tr, ids)
	if byCert.Outcome == verify.Verified || len(keys) == 0 || certs > 0 {
		return byCert, nil
	}
	return byKey, nil
}

// checkKeyless is the verdict of the profile's identities over sigs, and
// how many of them carry a certificate. Each signature with one is
// checked by sigstore-go's verifier, as cosign verify
// --certificate-identity(-regexp) --certificate-oidc-issuer(-regexp)
// checks it, offline:
//
//   - with tlog: required, its Rekor bundle must hold a log entry whose
//     signed entry timestamp a log of the trusted root signed, for this
//     signature and certificate, made while the certificate was valid;
//     with tlog: ignore, the bundle is not read and the certificate must
//     be valid now;
//   - the certificate chains to a CA of the trusted root, valid at that
//     time, for code signing;
//   - the signature over the payload checks with the certificate's key;
//   - the certificate's OIDC issuer (Fulcio's extension) and subject
//     (its SAN) match one identity of the profile;
//
// and then the payload must name the digest.
func checkKeyless(res verify.Result, sigs []sig, p *verify.Profile, tr *root.TrustedRoot, ids []sgverify.CertificateIdentity) (verify.Result, int) {
	opts := []sgverify.VerifierOption{sgverify.WithTransparencyLog(1), sgverify.WithIntegratedTimestamps(1)}
	if p.Tlog == verify.TlogIgnore {
		opts = []sgverify.VerifierOption{sgverify.WithCurrentTime()}
	}
	sv, err := sgverify.NewVerifier(tr, opts...)
	if err != nil {
		// Only a contradiction among the options above: a bug.
		res.Outcome, res.Reason, res.Detail = verify.Failed, verify.UntrustedCertificate, fmt.Sprintf("the sigstore verifier refused its options: %v", err)
		return res, 0
	}
	var policy []sgverify.PolicyOption
	for _, id := range ids {
		policy = append(policy, sgverify.WithCertificateIdentity(id))
	}

	var fails failures
	certs := 0
	for _, s := range sigs {
		if s.cert == "" {
			continue
		}
		certs++
		e, reason, why := entity(s, p.Tlog)
		if reason != "" {
			fails.add(reason, why)
			continue
		}
		out, err := sv.Verify(e, sgverify.NewPolicy(sgverify.WithArtifact(bytes.NewReader(s.payload)), policy...))
		if err != nil {
			fails.add(classify(err, e.cert, tr, p))
			continue
		}
		signer := "keyless"
		if c := out.Signature.Certificate; c != nil {
			signer = fmt.Sprintf("keyless %s %s", c.Extensions.Issuer, c.SubjectAlternativeName)
		}
		var pl payload.Cosign
		if err := pl.UnmarshalJSON(s.payload); err != nil {
			fails.add(verify.Malformed, fmt.Sprintf("a payload signed by %s that is not cosign's: %v", signer, err))
			continue
		}
		if got := pl.Image.DigestStr(); got != res.Digest {
			fails.add(verify.DigestMismatch, fmt.Sprintf("a signature by %s over %s is stored as the signature of %s: it was made for another image and copied, or the tag was moved", signer, got, res.Digest))
			continue
		}
		res.Outcome, res.Signer = verify.Verified, signer
		return res, certs
	}
	res.Outcome = verify.Failed
	if certs == 0 {
		res.Reason = verify.WrongIdentity
		res.Detail = fmt.Sprintf("%d signature(s), all made with a key, none with a certificate: profile %q names keyless identities (%s)", len(sigs), p.Name, identityList(p))
		return res, 0
	}
	res.Reason, res.Detail = fails.worst()
	return res, certs
}

// classic is a cosign signature in its classic form (a layer, its
// annotations) as sigstore-go's verifier takes it: a message signature
// over the payload, the certificate that made it, and its log entry.
type classic struct {
	sgverify.BaseSignedEntity
	cert    *x509.Certificate
	sig     *bundle.MessageSignature
	entries []*tlog.Entry
}

func (c *classic) VerificationContent() (sgverify.VerificationContent, error) {
	return bundle.NewCertificate(c.cert), nil
}
func (c *classic) SignatureContent() (sgverify.SignatureContent, error) { return c.sig, nil }
func (c *classic) TlogEntries() ([]*tlog.Entry, error)                  { return c.entries, nil }
func (c *classic) HasInclusionPromise() bool                            { return len(c.entries) > 0 }
func (c *classic) Timestamps() ([][]byte, error)                        { return nil, nil }

// Version is the oldest bundle's: the classic form predates bundles, and
// sigstore-go keeps its compatible hashes for them.
func (c *classic) Version() (string, error) { return "v0.1", nil }

// entity reads a keyless signature's annotations; a reason when they are
// not what cosign writes.
func entity(s sig, mode verify.TlogMode) (*classic, verify.Reason, string) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEMLimited([]byte(s.cert), 4)
	if err != nil || len(certs) != 1 {
		return nil, verify.Malformed, fmt.Sprintf("a %s annotation that is not one PEM certificate", CertificateAnnotation)
	}
	raw, err := base64.StdEncoding.DecodeString(s.b64)
	if err != nil {
		return nil, verify.Malformed, "a signature annotation that is not base64"
	}
	sum := sha256.Sum256(s.payload)
	e := &classic{cert: certs[0], sig: bundle.NewMessageSignature(sum[:], "SHA2_256", raw)}
	if mode == verify.TlogIgnore {
		return e, "", ""
	}
	if s.bundle == "" {
		return nil, verify.Unlogged, fmt.Sprintf("a signature by %s with no transparency-log entry (no %s annotation: signed with --tlog-upload=false?), and the profile requires one (tlog: required)", subjectOf(certs[0]), BundleAnnotation)
	}
	entry, err := rekorEntry(s.bundle)
	if err != nil {
		return nil, verify.Malformed, fmt.Sprintf("a %s annotation that is not a Rekor bundle: %v", BundleAnnotation, err)
	}
	e.entries = []*tlog.Entry{entry}
	return e, "", ""
}

// rekorBundle is cosign's bundle annotation (its pkg/cosign/bundle
// RekorBundle): the log's signed entry timestamp over the entry.
type rekorBundle struct {
	SignedEntryTimestamp []byte
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	}
}

// rekorEntry reads a bundle annotation into sigstore-go's log entry.
func rekorEntry(annotation string) (*tlog.Entry, error) {
	var b rekorBundle
	if err := json.Unmarshal([]byte(annotation), &b); err != nil {
		return nil, err
	}
	body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	logID, err := hex.DecodeString(b.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("logID: %w", err)
	}
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	return tlog.ParseTransparencyLogEntry(&protorekor.TransparencyLogEntry{
		LogIndex:          b.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion},
		IntegratedTime:    b.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: b.SignedEntryTimestamp},
		CanonicalizedBody: body,
	})
}

// classify names why sigstore-go refused a signature. Its errors are
// wrapped with the step that failed ("failed to verify log inclusion",
// "... leaf certificate", "... signature", "... certificate identity"),
// which verify/cosign's tests pin for each reason.
func classify(err error, cert *x509.Certificate, tr *root.TrustedRoot, p *verify.Profile) (verify.Reason, string) {
	who := subjectOf(cert)
	msg := err.Error()
	var noID *sgverify.ErrNoMatchingCertificateIdentity
	switch {
	case errors.As(err, &noID):
		return verify.WrongIdentity, fmt.Sprintf("a signature by %s, which no keyless identity of profile %q names (%s)", who, p.Name, identityList(p))
	case strings.Contains(msg, "integrated time outside certificate validity"):
		return verify.UntrustedCertificate, fmt.Sprintf("a signature by %s logged at a time its certificate was not valid (valid %s to %s)", who, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	case strings.Contains(msg, "log inclusion"):
		return verify.Unlogged, fmt.Sprintf("a signature by %s whose transparency-log entry no log of the trusted root %s signs, or that is for another signature (%v)", who, p.TrustedRoot, err)
	case strings.Contains(msg, "leaf certificate"):
		valid := fmt.Sprintf("valid %s to %s", cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
		if _, err := sgverify.VerifyLeafCertificate(cert.NotBefore, cert, tr); err == nil {
			// It chains when it was valid: it is not valid at the time
			// it is checked at.
			if p.Tlog == verify.TlogIgnore {
				return verify.UntrustedCertificate, fmt.Sprintf("a signature by %s whose certificate is not valid now (%s); with tlog: ignore the certificate must be valid at the present time, so a short-lived one verifies only for its few minutes", who, valid)
			}
			return verify.UntrustedCertificate, fmt.Sprintf("a signature by %s whose certificate was not valid when it was logged (%s)", who, valid)
		}
		return verify.UntrustedCertificate, fmt.Sprintf("a signature by %s whose certificate (issued by %q, %s) does not chain to a CA of the trusted root %s, or not for code signing: issued by another CA than the root trusts", who, cert.Issuer.String(), valid, p.TrustedRoot)
	case strings.Contains(msg, "failed to verify signature"):
		return verify.WrongKey, fmt.Sprintf("a signature by %s that does not check with its certificate's key: the payload or signature was altered", who)
	}
	return verify.UntrustedCertificate, fmt.Sprintf("a signature by %s refused: %v", who, err)
}

// subjectOf names a certificate's identity for a person: its OIDC issuer
// and subject, as cosign prints them.
func subjectOf(cert *x509.Certificate) string {
	s, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return fmt.Sprintf("a certificate from %q", cert.Issuer.String())
	}
	return fmt.Sprintf("subject %q of issuer %q", s.SubjectAlternativeName, s.Extensions.Issuer)
}

// failures keeps the most telling of a digest's refused signatures: one
// by the right signer over another digest first, then one by a trusted
// certificate for another identity, and so on down to what cosign would
// not have written.
type failures struct {
	reason verify.Reason
	detail string
	n      int
}

var rank = map[verify.Reason]int{
	verify.DigestMismatch: 6, verify.WrongIdentity: 5, verify.Unlogged: 4,
	verify.UntrustedCertificate: 3, verify.WrongKey: 2, verify.Malformed: 1,
}

func (f *failures) add(r verify.Reason, detail string) {
	f.n++
	if f.reason == "" || rank[r] > rank[f.reason] {
		f.reason, f.detail = r, detail
	}
}

func (f *failures) worst() (verify.Reason, string) {
	if f.n > 1 {
		return f.reason, fmt.Sprintf("%s (and %d other signature(s) refused)", f.detail, f.n-1)
	}
	return f.reason, f.detail
}

// identities are the profile's keyless identities as sigstore-go matches
// them: issuer and subject each exact or by (anchored) expression, as
// Flux v2's matchOIDCIdentity and cosign's flags match them.
func identities(p *verify.Profile) ([]sgverify.CertificateIdentity, error) {
	out := make([]sgverify.CertificateIdentity, 0, len(p.Keyless))
	for _, id := range p.Keyless {
		var issuerRe, subjectRe string
		if id.IssuerRegexp != nil {
			issuerRe = whole(id.IssuerRegexp.String())
		}
		if id.SubjectRegexp != nil {
			subjectRe = whole(id.SubjectRegexp.String())
		}
		ci, err := sgverify.NewShortCertificateIdentity(id.Issuer, issuerRe, id.Subject, subjectRe)
		if err != nil {
			return nil, fmt.Errorf("profile %q: keyless identity at line %d: %w", p.Name, id.Line, err)
		}
		out = append(out, ci)
	}
	return out, nil
}

// whole is an expression that matches only the whole of a value:
// sigstore-go matches an expression anywhere in the certificate's
// issuer or subject, and the config's check (it starts with ^ and ends
// with $) leaves an alternation's branches unanchored (in ^A|B$, B may
// end a subject that starts anywhere).
func whole(re string) string { return "^(?:" + re + ")$" }

func identityList(p *verify.Profile) string {
	var out []string
	for _, id := range p.Keyless {
		issuer, subject := id.Issuer, id.Subject
		if id.IssuerRegexp != nil {
			issuer = id.IssuerRegexp.String()
		}
		if id.SubjectRegexp != nil {
			subject = id.SubjectRegexp.String()
		}
		out = append(out, fmt.Sprintf("issuer %s, subject %s", issuer, subject))
	}
	return strings.Join(out, "; ")
}

// CheckTrustedRoot says whether data is a trusted root a keyless profile
// can verify by: Sigstore's trusted_root.json, naming at least one CA.
// fluxd checks each profile's at start, so that a wrong file stops it
// there rather than failing every verification.
func CheckTrustedRoot(data []byte) error {
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return fmt.Errorf("%w: it should be a Sigstore trusted_root.json (application/vnd.dev.sigstore.trustedroot+json), as cosign trusted-root create writes it or Sigstore's TUF repository serves it", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return errors.New("it names no certificate authority, so no keyless certificate could chain to it: is it the right file?")
	}
	return nil
}

// trustedRoot parses the profile's trusted root (the content Load read,
// else its file), keeping the last few parsed by content.
func (v *Verifier) trustedRoot(p *verify.Profile) (*root.TrustedRoot, error) {
	data := p.TrustedRootJSON
	if data == nil {
		b, err := readFile(p.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("profile %q: reading its trusted root: %w", p.Name, err)
		}
		data = b
	}
	sum := sha256.Sum256(data)
	v.roots.mu.Lock()
	defer v.roots.mu.Unlock()
	if tr, ok := v.roots.m[sum]; ok {
		return tr, nil
	}
	if err := CheckTrustedRoot(data); err != nil {
		return nil, fmt.Errorf("profile %q: trusted root %s: %w", p.Name, p.TrustedRoot, err)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("profile %q: trusted root %s: %w", p.Name, p.TrustedRoot, err)
	}
	if v.roots.m == nil || len(v.roots.m) >= maxRoots {
		v.roots.m = map[[sha256.Size]byte]*root.TrustedRoot{}
	}
	v.roots.m[sum] = tr
	return tr, nil
}

// maxRoots bounds the parsed trusted roots kept: a config names a few.
const maxRoots = 16

// roots are parsed trusted roots by the SHA-256 of their JSON.
type roots struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*root.TrustedRoot
}

// readFile reads a trusted root that Load did not (a profile built by
// hand), bounded as Load bounds it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const limit = 8 * verify.MaxConfigSize
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes: too big for a trusted root", path, limit)
	}
	return data, nil
}
