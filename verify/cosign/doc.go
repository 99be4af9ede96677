// Package cosign checks cosign's signatures on image digests in a
// registry, with go-containerregistry to read them and the sigstore
// libraries to verify them: github.com/sigstore/sigstore/pkg/signature
// for keys, github.com/sigstore/sigstore-go for keyless. It is verify's
// adapter: only cmd/fluxd wires it in (--verify-config).
//
// Where it reads signatures: cosign's tag scheme. For the digest
// sha256:HEX of repository R it reads R:sha256-HEX.sig, and each of its
// simple-signing layers is one signature: the layer is the payload, the
// dev.cosignproject.cosign/signature annotation its signature. Where the
// tag is missing it asks the registry's OCI 1.1 referrers API (or its
// fallback tag, sha256-HEX) for cosign signatures (artifact type
// application/vnd.dev.cosign.artifact.sig.v1+json), as cosign writes them
// with --registry-referrers-mode=oci-1-1, and reads their layers alike.
//
// Keys (cosign.go): each signature is checked with each of the profile's
// public keys, then the payload must name the digest
// (critical.image.docker-manifest-digest).
//
// Attestations (attest.go): for a profile that requires predicate types,
// once the signature verified, the DSSE layers of R:sha256-HEX.att (or,
// where that tag is missing, of the digest's referrers of artifact type
// application/vnd.in-toto+json) are checked with the profile's keys
// (sigstore's pkg/signature/dsse, over the PAE encoding), and each
// required type needs one whose signed in-toto statement (decoded with
// github.com/in-toto/attestation's Go types, v0.1 or v1) has that
// predicateType and names the digest as a subject. The envelope check is
// a function (EnvelopeCheck), so keyless signers can be added beside
// KeyEnvelopes.
//
// Keyless (keyless.go): a layer that carries a certificate
// (dev.sigstore.cosign/certificate) and, from cosign's upload to Rekor,
// a bundle (dev.sigstore.cosign/bundle: the log entry and its signed
// entry timestamp) is handed to sigstore-go's verifier as a signed
// entity: the certificate, a message signature over the payload, and the
// log entry. It checks, offline, against the profile's trusted root
// (trusted_root.json, read by sigstore-go's root package): the SET by a
// log of the root, the entry being for this signature and certificate,
// the certificate valid at the entry's time (with tlog: ignore, now), its
// chain to a CA of the root (through the root's intermediates; the
// dev.sigstore.cosign/chain annotation is not trusted) for code signing,
// the signature, and the identity (issuer and subject, each exact or by
// expression, as NewShortCertificateIdentity matches them). Then the
// payload must name the digest. Its errors are told apart by the step
// that failed (classify), which the tests pin per reason.
//
// What it does not: Rekor inclusion proofs or any request to Rekor,
// Fulcio or TUF; SCTs, timestamp authorities; attestations signed
// keyless (a keyless profile's attestations are checked with its keys
// only: with none, an error, no verdict); the content of a predicate;
// the new Sigstore bundle format (cosign 3's), notation.
//
// Why these libraries: github.com/sigstore/sigstore v1.10.11 (v1.11 needs
// Go 1.27) added 15 packages and 0.7 MB to fluxd's binary for keys.
// sigstore-go v1.1.4 (newer ones were not tried: v1.1.4 is what go get
// took on Go 1.26 without moving the go directive) adds 141 packages and
// 7.7 MB to fluxd's binary (151.1 to 158.8 MB measured, cmd/fluxd before
// and after keyless): Rekor's types and go-openapi, certificate-
// transparency-go, go-tuf's client (unused: fluxd fetches no trusted
// root), in-toto, OpenTelemetry's API. cosign's pkg/cosign (v2.6.5) would
// add 249 packages and 10.7 MB; sigstore-go is its verifier underneath,
// and takes a signature in cosign's classic form through its SignedEntity
// interface.
package cosign
