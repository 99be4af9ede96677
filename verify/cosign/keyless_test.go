package cosign

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/verify"
)

const (
	github   = "https://token.actions.githubusercontent.com"
	workflow = "https://github.com/org/app/.github/workflows/release.yml@refs/heads/main"
)

func newCA(t *testing.T) *cosigntest.CA {
	t.Helper()
	ca, err := cosigntest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// keylessProfile is a profile of ids under ca's trusted root, as Load
// leaves it.
func keylessProfile(t *testing.T, ca *cosigntest.CA, tlog verify.TlogMode, ids ...verify.Identity) *verify.Profile {
	t.Helper()
	js, err := ca.TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &verify.Profile{Name: "ci", Keyless: ids, TrustedRoot: "/etc/fluxd/trusted_root.json", TrustedRootJSON: js, Tlog: tlog}
}

// The outcomes cosign verify --certificate-identity(-regexp)
// --certificate-oidc-issuer(-regexp) gives for these, and Flux v2's
// matchOIDCIdentity (issuer and subject each exact or by expression), as
// fluxd reports them.
func TestVerifyKeyless(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ca, other, rogue := newCA(t), newCA(t), newCA(t)
	// rogue's certificates are logged in ca's log, as anyone's are in
	// the public Rekor: the log vouches for the time, not for the CA.
	rogue.LogTo(ca)
	exact := verify.Identity{Issuer: github, Subject: workflow}
	byRegexp := verify.Identity{Issuer: github, SubjectRegexp: regexp.MustCompile(`^https://github\.com/org/[^/]+/\.github/workflows/release\.yml@refs/heads/main$`)}
	email := verify.Identity{IssuerRegexp: regexp.MustCompile(`^https://accounts\.(google|example)\.com$`), Subject: "release@example.com"}
	now := time.Now()
	other1 := push(t, repo, "other")

	for _, tc := range []struct {
		name    string
		signer  *cosigntest.CA // nil: unsigned
		k       cosigntest.Keyless
		ids     []verify.Identity
		tlog    verify.TlogMode
		outcome verify.Outcome
		reason  verify.Reason
		detail  string // in Detail, or Signer when verified
	}{
		{name: "right identity, exact", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow},
			ids: []verify.Identity{exact}, outcome: verify.Verified, detail: "keyless " + github + " " + workflow},
		{name: "subject by expression", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: "https://github.com/org/web/.github/workflows/release.yml@refs/heads/main"},
			ids: []verify.Identity{byRegexp}, outcome: verify.Verified, detail: "keyless " + github + " https://github.com/org/web/"},
		{name: "e-mail subject, issuer by expression", signer: ca, k: cosigntest.Keyless{Issuer: "https://accounts.google.com", Subject: "release@example.com"},
			ids: []verify.Identity{exact, email}, outcome: verify.Verified, detail: "keyless https://accounts.google.com release@example.com"},
		{name: "wrong subject", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: "https://github.com/org/app/.github/workflows/test.yml@refs/heads/main"},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.WrongIdentity, detail: `subject "https://github.com/org/app/.github/workflows/test.yml@refs/heads/main"`},
		{name: "wrong issuer", signer: ca, k: cosigntest.Keyless{Issuer: "https://evil.example", Subject: workflow},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.WrongIdentity, detail: `of issuer "https://evil.example"`},
		{name: "expression does not match another org", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: "https://github.com/org-evil/app/.github/workflows/release.yml@refs/heads/main"},
			ids: []verify.Identity{byRegexp}, outcome: verify.Failed, reason: verify.WrongIdentity},
		{name: "another ref", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: "https://github.com/org/app/.github/workflows/release.yml@refs/heads/fork"},
			ids: []verify.Identity{byRegexp}, outcome: verify.Failed, reason: verify.WrongIdentity},
		{name: "certificate from another CA, logged in a trusted log", signer: rogue, k: cosigntest.Keyless{Issuer: github, Subject: workflow},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.UntrustedCertificate, detail: "does not chain to a CA of the trusted root"},
		{name: "certificate and log of another sigstore", signer: other, k: cosigntest.Keyless{Issuer: github, Subject: workflow},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.Unlogged, detail: "no log of the trusted root"},
		{name: "certificate of another CA, log ignored", signer: other, k: cosigntest.Keyless{Issuer: github, Subject: workflow},
			ids: []verify.Identity{exact}, tlog: verify.TlogIgnore, outcome: verify.Failed, reason: verify.UntrustedCertificate, detail: "does not chain to a CA of the trusted root"},
		{name: "certificate not for code signing", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.UntrustedCertificate},
		{name: "expired when logged", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NotBefore: now.Add(-30 * time.Minute), NotAfter: now.Add(-20 * time.Minute)},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.UntrustedCertificate, detail: "logged at a time its certificate was not valid"},
		{name: "not yet valid when logged", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NotBefore: now.Add(20 * time.Minute)},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.UntrustedCertificate},
		{name: "expired now, valid when logged", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NotBefore: now.Add(-30 * time.Minute), NotAfter: now.Add(-20 * time.Minute), LoggedAt: now.Add(-25 * time.Minute)},
			ids: []verify.Identity{exact}, outcome: verify.Verified},
		{name: "expired now, log ignored", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NotBefore: now.Add(-30 * time.Minute), NotAfter: now.Add(-20 * time.Minute), LoggedAt: now.Add(-25 * time.Minute)},
			ids: []verify.Identity{exact}, tlog: verify.TlogIgnore, outcome: verify.Failed, reason: verify.UntrustedCertificate, detail: "not valid now"},
		{name: "not logged", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NoLog: true},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.Unlogged, detail: "tlog-upload=false"},
		{name: "not logged, log ignored", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, NoLog: true},
			ids: []verify.Identity{exact}, tlog: verify.TlogIgnore, outcome: verify.Verified},
		{name: "payload for another digest", signer: ca, k: cosigntest.Keyless{Issuer: github, Subject: workflow, For: other1},
			ids: []verify.Identity{exact}, outcome: verify.Failed, reason: verify.DigestMismatch, detail: "over " + other1.DigestStr()},
		{name: "unsigned", ids: []verify.Identity{exact}, outcome: verify.Unsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := push(t, repo, strings.ReplaceAll(tc.name, " ", "-")[:min(40, len(tc.name))])
			if tc.signer != nil {
				if err := tc.signer.SignKeyless(d, tc.k); err != nil {
					t.Fatal(err)
				}
			}
			mode := tc.tlog
			if mode == "" {
				mode = verify.TlogRequired
			}
			got, err := New(Config{}).Verify(context.Background(), repo.String(), d.DigestStr(), keylessProfile(t, ca, mode, tc.ids...), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", got)
			if got.Outcome != tc.outcome || got.Reason != tc.reason {
				t.Fatalf("%s (%s), want %s (%s): %s", got.Outcome, got.Reason, tc.outcome, tc.reason, got)
			}
			if text := got.Detail + got.Signer; !strings.Contains(text, tc.detail) {
				t.Errorf("%q does not say %q", text, tc.detail)
			}
		})
	}
}

// A signature whose payload or signature was altered after logging is
// refused: by the log (its entry is for another signature), or with the
// log ignored by the certificate's key.
func TestVerifyKeylessAltered(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ca := newCA(t)
	id := cosigntest.Keyless{Issuer: github, Subject: workflow}
	d := push(t, repo, "1.0.0")
	a, err := ca.Signature(d, id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Signature(d, id)
	if err != nil {
		t.Fatal(err)
	}
	// a's certificate and log entry, b's signature (by b's key).
	a.Annotations[SignatureAnnotation] = b.Annotations[SignatureAnnotation]
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), a)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(sigTag(d.DigestStr())), img); err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[verify.TlogMode]verify.Reason{verify.TlogRequired: verify.Unlogged, verify.TlogIgnore: verify.WrongKey} {
		got, err := New(Config{}).Verify(context.Background(), repo.String(), d.DigestStr(), keylessProfile(t, ca, mode, verify.Identity{Issuer: github, Subject: workflow}), nil)
		if err != nil || got.Outcome != verify.Failed || got.Reason != want {
			t.Errorf("tlog %s: %s, %v; want failed (%s)", mode, got, err, want)
		}
	}
	// Annotations that are not cosign's.
	a.Annotations[CertificateAnnotation] = "not a certificate"
	img, err = mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), a)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(sigTag(d.DigestStr())), img); err != nil {
		t.Fatal(err)
	}
	got, err := New(Config{}).Verify(context.Background(), repo.String(), d.DigestStr(), keylessProfile(t, ca, verify.TlogRequired, verify.Identity{Issuer: github, Subject: workflow}), nil)
	if err != nil || got.Reason != verify.Malformed {
		t.Errorf("a certificate annotation that is not PEM: %s, %v; want failed (malformed)", got, err)
	}
}

// A profile of keys and identities verifies a signature by either; an
// image signed with a key only fails a profile of identities only.
func TestVerifyKeylessAndKeys(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ca := newCA(t)
	key := newSigner(t, "ci.pub")
	id := verify.Identity{Issuer: github, Subject: workflow}
	byKey, byCert := push(t, repo, "key"), push(t, repo, "cert")
	key.sign(t, byKey, byKey.DigestStr())
	if err := ca.SignKeyless(byCert, cosigntest.Keyless{Issuer: github, Subject: workflow}); err != nil {
		t.Fatal(err)
	}
	both := keylessProfile(t, ca, verify.TlogRequired, id)
	both.Keys = []string{"ci.pub"}
	v := New(Config{})
	for d, want := range map[name.Digest]string{byKey: "key " + key.pub.ID, byCert: "keyless " + github} {
		got, err := v.Verify(context.Background(), repo.String(), d.DigestStr(), both, []verify.PublicKey{key.pub})
		if err != nil || got.Outcome != verify.Verified || !strings.HasPrefix(got.Signer, want) {
			t.Errorf("%s: %s, %v; want verified by %s", d.Identifier(), got, err, want)
		}
	}
	got, err := v.Verify(context.Background(), repo.String(), byKey.DigestStr(), keylessProfile(t, ca, verify.TlogRequired, id), nil)
	if err != nil || got.Reason != verify.WrongIdentity || !strings.Contains(got.Detail, "made with a key") {
		t.Errorf("signed with a key, identities only: %s, %v; want failed (wrong-identity), made with a key", got, err)
	}
	// A keyless signature under a profile that also names a key that did
	// not sign: the keyless verdict speaks.
	other := newCA(t)
	if err := other.SignKeyless(byCert, cosigntest.Keyless{Issuer: github, Subject: workflow}); err != nil {
		t.Fatal(err)
	}
	got, err = v.Verify(context.Background(), repo.String(), byCert.DigestStr(), both, []verify.PublicKey{key.pub})
	if err != nil || got.Reason != verify.Unlogged {
		t.Errorf("another sigstore's signature under keys and identities: %s, %v; want failed (unlogged)", got, err)
	}
}

// cosign sign --registry-referrers-mode=oci-1-1 keyless: the same
// annotations on a referrer's layer.
func TestVerifyKeylessFromReferrers(t *testing.T) {
	t.Parallel()
	srv := newReferrersRegistry(t)
	ca := newCA(t)
	d := push(t, srv, "1.0.0")
	add, err := ca.Signature(d, cosigntest.Keyless{Issuer: github, Subject: workflow})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), add)
	if err != nil {
		t.Fatal(err)
	}
	refer(t, d, img)
	got, err := New(Config{}).Verify(context.Background(), srv.String(), d.DigestStr(), keylessProfile(t, ca, verify.TlogRequired, verify.Identity{Issuer: github, Subject: workflow}), nil)
	if err != nil || got.Outcome != verify.Verified {
		t.Fatalf("keyless as a referrer: %s, %v; want verified", got, err)
	}
}

// A trusted root that is not one is an error, not a verdict: the
// profile cannot verify anything until it is fixed.
func TestVerifyKeylessBadTrustedRoot(t *testing.T) {
	t.Parallel()
	repo := testRegistry(t)
	ca := newCA(t)
	d := push(t, repo, "1.0.0")
	if err := ca.SignKeyless(d, cosigntest.Keyless{Issuer: github, Subject: workflow}); err != nil {
		t.Fatal(err)
	}
	for what, js := range map[string]string{
		"not a trusted root": `{"mediaType": 3}`,
		"no CA":              `{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`,
		"a PEM":              base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----")),
	} {
		p := keylessProfile(t, ca, verify.TlogRequired, verify.Identity{Issuer: github, Subject: workflow})
		p.TrustedRootJSON = []byte(js)
		got, err := New(Config{}).Verify(context.Background(), repo.String(), d.DigestStr(), p, nil)
		if err == nil || got.Outcome != "" || !strings.Contains(err.Error(), "trusted root") {
			t.Errorf("%s: %s, %v; want an error naming the trusted root", what, got, err)
		}
	}
}

func newReferrersRegistry(t *testing.T) name.Repository {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/team/app")
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// An expression the config takes as anchored (it starts with ^ and ends
// with $) matches the whole identity even where it alternates: in
// ^A|B$, B alone would otherwise match anywhere from the start of the
// subject, so a workflow of another organisation whose subject ends
// with B would verify.
func TestVerifyKeylessAlternationIsAnchored(t *testing.T) {
	t.Parallel()
	cfg, err := verify.Parse([]byte(`profiles:
- name: ci
  keyless:
  - issuer: ` + github + `
    subjectRegexp: ^https://github\.com/org/app/.*|https://github\.com/org/web/.*$
  trustedRoot: /etc/fluxd/trusted_root.json
`))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := cfg.Profile("ci")
	if !ok {
		t.Fatal("no profile ci")
	}
	repo := testRegistry(t)
	ca := newCA(t)
	pr := keylessProfile(t, ca, verify.TlogRequired, p.Keyless...)
	for _, tc := range []struct {
		subject string
		outcome verify.Outcome
	}{
		{"https://github.com/org/web/.github/workflows/release.yml@refs/heads/main", verify.Verified},
		{"https://github.com/org/app/.github/workflows/release.yml@refs/heads/main", verify.Verified},
		{"https://github.com/evil/x/.github/workflows/release.yml@refs/heads/https://github.com/org/web/x", verify.Failed},
	} {
		d := push(t, repo, fmt.Sprintf("alt-%d", len(tc.subject)))
		if err := ca.SignKeyless(d, cosigntest.Keyless{Issuer: github, Subject: tc.subject}); err != nil {
			t.Fatal(err)
		}
		got, err := New(Config{}).Verify(context.Background(), repo.String(), d.DigestStr(), pr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Outcome != tc.outcome {
			t.Errorf("subject %s: %s, want %s: %s", tc.subject, got.Outcome, tc.outcome, got)
		}
	}
}
