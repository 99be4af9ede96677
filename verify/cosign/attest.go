package cosign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/verify"
)

// cosign's names for the attestations it stores beside an image (its
// pkg/types.DssePayloadType and IntotoPayloadType, and the layer
// annotation cosign attest writes): `cosign attest --key` pushes the
// manifest tagged sha256-HEX.att, one layer per attestation, each a DSSE
// envelope whose payload is an in-toto statement; with
// --registry-referrers-mode=oci-1-1 it pushes one referrer of artifact
// type IntotoArtifactType with those layers instead.
const (
	DSSEMediaType           = "application/vnd.dsse.envelope.v1+json"
	IntotoPayloadType       = "application/vnd.in-toto+json"
	IntotoArtifactType      = IntotoPayloadType
	PredicateTypeAnnotation = "predicateType"
)

// The in-toto statement types cosign writes (v0.1, cosign 2) and the
// current one (v1). Both have the same fields where it matters here:
// _type, subject (name, digest), predicateType, predicate.
const (
	statementV01 = "https://in-toto.io/Statement/v0.1"
	statementV1  = intoto.StatementTypeUri
)

// EnvelopeCheck verifies one DSSE envelope's signature (over its PAE
// encoding) for a profile: it returns the envelope's payload and who
// signed it, or an error when no signer the profile trusts did.
// KeyEnvelopes is the one for a profile's keys; keyless signers can give
// another without touching the rest of the attestation check.
type EnvelopeCheck func(ctx context.Context, envelope []byte) (payload []byte, signer string, err error)

// KeyEnvelopes checks envelopes with the profile's public keys: one of
// them must have signed, and the payload type must be in-toto's.
func KeyEnvelopes(keys []verify.PublicKey) (EnvelopeCheck, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("the profile has no public key, and attestations are verified with keys only: %w", verify.ErrNotBuilt)
	}
	verifiers := make([]signature.Verifier, len(keys))
	for i, k := range keys {
		var err error
		if verifiers[i], err = signature.LoadVerifier(k.Key, crypto.SHA256); err != nil {
			return nil, fmt.Errorf("key %s (%s): %w", k.ID, k.Path, err)
		}
	}
	return func(ctx context.Context, env []byte) ([]byte, string, error) {
		var last error
		for i, ver := range verifiers {
			var payload []byte
			w := dsse.WrapVerifier(ver, dsse.WithExpectedPayloadType(IntotoPayloadType), dsse.WithDecodedPayload(&payload))
			if last = w.VerifySignature(bytes.NewReader(env), nil); last == nil {
				return payload, fmt.Sprintf("key %s (%s)", keys[i].ID, keys[i].Path), nil
			}
		}
		return nil, "", fmt.Errorf("no key of the profile (%s) verifies its DSSE signature: %w", keyIDs(keys), last)
	}, nil
}

// attestation is one DSSE layer stored as an attestation of a digest.
type attestation struct {
	// claimed is the layer's predicateType annotation: not signed, so it
	// only names what a failure was about.
	claimed  string
	envelope []byte
}

// finding is what the envelopes of one predicate type turned out to be.
type finding struct {
	good, mismatch, unsigned, malformed []string
}

// VerifyAttestations checks that repository@digest carries, for each of
// the required predicate types, an attestation signed as check requires,
// whose in-toto statement has that predicate type and names the digest
// as its subject. Verified: every type has one (Signer says by whom).
// Failed: the first type in order without one, with Reason
// MissingAttestation (none of that type at all), WrongKey (of that type,
// signed by no signer of the profile), DigestMismatch (signed, but made
// for another digest) or Malformed; Detail names every type that fails
// and why. An error is a registry that could not be asked.
func (v *Verifier) VerifyAttestations(ctx context.Context, repository, digest, profile string, required []string, check EnvelopeCheck) (verify.Result, error) {
	res := verify.Result{Digest: digest, Profile: profile}
	d, err := name.NewDigest(repository+"@"+digest, name.WeakValidation)
	if err != nil {
		return res, fmt.Errorf("verifying the attestations of %s@%s: %w", repository, digest, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, v.opts...)
	atts, err := attestations(d, opts)
	if err != nil {
		return res, fmt.Errorf("reading the attestations of %s: %w", d, err)
	}
	alg, hex, _ := strings.Cut(digest, ":")

	// What each envelope turned out to be, by predicate type.
	found := map[string]*finding{}
	at := func(t string) *finding {
		if found[t] == nil {
			found[t] = &finding{}
		}
		return found[t]
	}
	for _, a := range atts {
		payload, signer, err := check(ctx, a.envelope)
		if err != nil {
			t := a.claimed
			if t == "" {
				t = unverifiedType(a.envelope)
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			at(t).unsigned = append(at(t).unsigned, firstLine(err))
			continue
		}
		st, err := statement(payload)
		if err != nil {
			at(a.claimed).malformed = append(at(a.claimed).malformed, fmt.Sprintf("an envelope signed by %s whose payload is not an in-toto statement: %v", signer, err))
			continue
		}
		f := at(st.GetPredicateType())
		if !names(st, alg, hex) {
			f.mismatch = append(f.mismatch, fmt.Sprintf("one signed by %s for %s", signer, subjects(st)))
			continue
		}
		f.good = append(f.good, signer)
	}

	var problems []string
	var signers []string
	for _, t := range required {
		f := at(t)
		switch {
		case len(f.good) > 0:
			signers = append(signers, fmt.Sprintf("%s by %s", t, f.good[0]))
			continue
		case len(f.mismatch) > 0:
			res.Reason = first(res.Reason, verify.DigestMismatch)
			problems = append(problems, fmt.Sprintf("attestation %s: %s, not %s: made for another image and copied, or the tag was moved", t, strings.Join(f.mismatch, "; "), digest))
		case len(f.unsigned) > 0:
			res.Reason = first(res.Reason, verify.WrongKey)
			problems = append(problems, fmt.Sprintf("attestation %s: %d envelope(s), none signed by the key(s) of profile %q (%s)", t, len(f.unsigned), profile, f.unsigned[0]))
		case len(f.malformed) > 0:
			res.Reason = first(res.Reason, verify.Malformed)
			problems = append(problems, fmt.Sprintf("attestation %s: %s", t, strings.Join(f.malformed, "; ")))
		default:
			res.Reason = first(res.Reason, verify.MissingAttestation)
			problems = append(problems, fmt.Sprintf("no attestation of predicate type %s for %s (looked in tag %s and the referrers; %s)", t, digest, attTag(digest), present(found)))
		}
	}
	if len(problems) > 0 {
		res.Outcome, res.Detail = verify.Failed, strings.Join(problems, "; ")
		return res, nil
	}
	res.Outcome, res.Signer = verify.Verified, "attestations "+strings.Join(signers, ", ")
	return res, nil
}

func first(had, r verify.Reason) verify.Reason {
	if had != "" {
		return had
	}
	return r
}

// present says which predicate types the digest does have, for a
// missing one's detail.
func present(found map[string]*finding) string {
	var ts []string
	for t, f := range found {
		if t != "" && (len(f.good)+len(f.mismatch)+len(f.unsigned)+len(f.malformed)) > 0 {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return "it has none"
	}
	slices.Sort(ts)
	return "it has " + strings.Join(ts, ", ")
}

// statement decodes an in-toto statement (v0.1 as cosign 2 writes it, or
// v1) with in-toto's own Go types. Unknown fields are ignored, so a
// v0.1 statement decodes into the v1 type.
func statement(payload []byte) (*intoto.Statement, error) {
	var st intoto.Statement
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, &st); err != nil {
		return nil, err
	}
	switch st.GetType() {
	case statementV01, statementV1:
	default:
		return nil, fmt.Errorf("statement type %q, want %s or %s", st.GetType(), statementV01, statementV1)
	}
	if st.GetPredicateType() == "" {
		return nil, errors.New("no predicateType")
	}
	if len(st.GetSubject()) == 0 {
		return nil, errors.New("no subject")
	}
	return &st, nil
}

// names says whether one of the statement's subjects is the digest.
func names(st *intoto.Statement, alg, hex string) bool {
	for _, s := range st.GetSubject() {
		if got, ok := s.GetDigest()[alg]; ok && strings.EqualFold(got, hex) {
			return true
		}
	}
	return false
}

func subjects(st *intoto.Statement) string {
	var out []string
	for _, s := range st.GetSubject() {
		for alg, h := range s.GetDigest() {
			out = append(out, alg+":"+h)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "no digest"
	}
	return strings.Join(out, ", ")
}

// unverifiedType reads the predicate type of an envelope whose signature
// did not check, only to say what it claimed to be. It is never trusted.
func unverifiedType(env []byte) string {
	var e struct{ Payload string }
	if json.Unmarshal(env, &e) != nil {
		return ""
	}
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return ""
	}
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if json.Unmarshal(p, &st) != nil {
		return ""
	}
	return st.PredicateType
}

// attestations reads the digest's attestation envelopes: from cosign's
// tag, else from its referrers of in-toto's artifact type.
func attestations(d name.Digest, opts []remote.Option) ([]attestation, error) {
	return artifacts(d, attTag(d.DigestStr()), IntotoArtifactType, opts, envelopes)
}

// envelopes appends the DSSE layers of an attestation manifest to out.
func envelopes(img v1.Image, out []attestation) ([]attestation, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.MediaType != types.MediaType(DSSEMediaType) {
			continue
		}
		if len(out) >= maxSignatures {
			break
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, err
		}
		env, err := readEnvelope(layer)
		if err != nil {
			return nil, fmt.Errorf("attestation %s: %w", l.Digest, err)
		}
		total := len(env)
		for _, a := range out {
			total += len(a.envelope)
		}
		if total > maxEnvelopes {
			return nil, fmt.Errorf("attestations of more than %d bytes in all: more than fluxd reads for one image", maxEnvelopes)
		}
		out = append(out, attestation{claimed: l.Annotations[PredicateTypeAnnotation], envelope: env})
	}
	return out, nil
}

// maxEnvelope bounds one attestation read: an SBOM of a large image,
// base64 in its envelope, runs to megabytes. maxEnvelopes bounds all of
// one digest's, so that whoever can push to the repository cannot make
// fluxd hold maxSignatures of the largest.
const (
	maxEnvelope  = 32 << 20
	maxEnvelopes = 64 << 20
)

// readEnvelope reads an envelope whole; go-containerregistry checks its
// digest at the end.
func readEnvelope(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	p, err := io.ReadAll(io.LimitReader(rc, maxEnvelope+1))
	if err != nil {
		return nil, err
	}
	if len(p) > maxEnvelope {
		return nil, fmt.Errorf("more than %d bytes: too large an attestation for fluxd to read", maxEnvelope)
	}
	return p, nil
}

// attTag is cosign's tag for a digest's attestations: sha256-HEX.att.
func attTag(digest string) string {
	return strings.Replace(digest, ":", "-", 1) + ".att"
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// attested follows a signature's verification with the profile's
// required attestations, checked with its keys: the result is Verified
// only when both are.
func (v *Verifier) attested(ctx context.Context, sig verify.Result, err error, repository string, p *verify.Profile, keys []verify.PublicKey) (verify.Result, error) {
	if err != nil || sig.Outcome != verify.Verified || len(p.Attestations) == 0 {
		return sig, err
	}
	check, err := KeyEnvelopes(keys)
	if err != nil {
		return verify.Result{Digest: sig.Digest, Profile: p.Name}, fmt.Errorf("profile %q requires attestations: %w", p.Name, err)
	}
	att, err := v.VerifyAttestations(ctx, repository, sig.Digest, p.Name, p.Attestations, check)
	if err != nil {
		return att, err
	}
	if att.Outcome != verify.Verified {
		att.Detail = fmt.Sprintf("signed by %s, but %s", sig.Signer, att.Detail)
		return att, nil
	}
	sig.Signer += "; " + att.Signer
	return sig, nil
}
