// Command sign signs images as cosign does with a key, for the local
// demo and the signing guide (docs/security.md, "Requiring signatures for
// one repository"), where cosign is not installed:
//
//	COSIGN_PASSWORD=... go run ./hack/sign generate-key-pair       # cosign.key, cosign.pub here
//	COSIGN_PASSWORD=... go run ./hack/sign sign --key cosign.key IMAGE
//
// The key files are cosign's (cosign.key: PKCS #8, encrypted with the
// password, PEM "ENCRYPTED SIGSTORE PRIVATE KEY"; cosign.pub: PEM), and
// the signature is cosign's tag scheme (internal/cosigntest): the
// simple-signing payload for IMAGE's digest, signed, pushed as
// sha256-HEX.sig. No transparency log is written to, as 'cosign sign
// --tlog-upload=false' does not. IMAGE by tag is signed at the digest
// the tag names now.
//
// For keyless signatures and attestations (docs/security.md, "On the
// local demo" under "Keyless signatures" and "Requiring attestations"):
//
//	go run ./hack/sign ca DIR      # a test CA and log, kept in DIR; DIR/trusted_root.json
//	go run ./hack/sign keyless --ca DIR --issuer URL --subject S IMAGE
//	COSIGN_PASSWORD=... go run ./hack/sign attest --key cosign.key --type spdxjson [--predicate FILE] IMAGE
//
// The CA is internal/cosigntest's: a root and an intermediate that issue
// 10-minute certificates for the OIDC identity given (no OIDC token is
// asked for: this is a test CA, not Fulcio), and a log key that signs
// each signature's entry timestamp as Rekor would (no Rekor: nothing is
// published). attest pushes an in-toto statement in a DSSE envelope
// signed with the key, as 'cosign attest --key --tlog-upload=false'.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

const usage = `usage:
  COSIGN_PASSWORD=PW sign generate-key-pair [--output-key-prefix cosign]
  COSIGN_PASSWORD=PW sign sign --key cosign.key IMAGE
  sign ca DIR
  sign keyless --ca DIR --issuer URL --subject SUBJECT IMAGE
  COSIGN_PASSWORD=PW sign attest --key cosign.key --type TYPE [--predicate FILE] IMAGE`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sign:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	password := []byte(os.Getenv("COSIGN_PASSWORD")) // "" is a password cosign accepts too
	switch args[0] {
	case "generate-key-pair":
		fs := flag.NewFlagSet("generate-key-pair", flag.ContinueOnError)
		prefix := fs.String("output-key-prefix", "cosign", "write PREFIX.key and PREFIX.pub")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return generate(*prefix, password)
	case "sign":
		fs := flag.NewFlagSet("sign", flag.ContinueOnError)
		key := fs.String("key", "", "the private key (cosign.key)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *key == "" || fs.NArg() != 1 {
			return errors.New(usage)
		}
		return sign(*key, password, fs.Arg(0))
	case "ca":
		if len(args) != 2 || strings.HasPrefix(args[1], "-") {
			return errors.New("ca needs one argument, the directory to keep the test CA in\n" + usage)
		}
		return makeCA(args[1])
	case "keyless":
		fs := flag.NewFlagSet("keyless", flag.ContinueOnError)
		dir := fs.String("ca", "", "the directory 'sign ca' wrote")
		issuer := fs.String("issuer", "", "the OIDC issuer the certificate names (https://token.actions.githubusercontent.com)")
		subject := fs.String("subject", "", "the certificate's identity: an e-mail, or a URI such as a workflow's")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *dir == "" || *issuer == "" || *subject == "" || fs.NArg() != 1 {
			return errors.New("keyless needs --ca, --issuer, --subject and one IMAGE\n" + usage)
		}
		return keyless(*dir, *issuer, *subject, fs.Arg(0))
	case "attest":
		fs := flag.NewFlagSet("attest", flag.ContinueOnError)
		key := fs.String("key", "", "the private key (cosign.key)")
		typ := fs.String("type", "", "the predicate type: a URI, or cosign's spdxjson, spdx, cyclonedx, slsaprovenance02, slsaprovenance1")
		predicate := fs.String("predicate", "", "a file of the predicate, a JSON object (default {})")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *key == "" || *typ == "" || fs.NArg() != 1 {
			return errors.New("attest needs --key, --type and one IMAGE\n" + usage)
		}
		return attest(*key, password, *typ, *predicate, fs.Arg(0))
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func generate(prefix string, password []byte) error {
	for _, p := range []string{prefix + ".key", prefix + ".pub"} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists: not overwritten (remove it, or give --output-key-prefix)", p)
		}
	}
	s, err := cosigntest.NewSigner()
	if err != nil {
		return err
	}
	if err := s.WritePrivateKey(prefix+".key", password); err != nil {
		return err
	}
	if err := s.WritePublicKey(prefix + ".pub"); err != nil {
		return err
	}
	fmt.Printf("Private key written to %s.key\nPublic key written to %s.pub (key ID %s)\n", prefix, prefix, s.ID())
	return nil
}

func sign(keyPath string, password []byte, image string) error {
	s, err := cosigntest.LoadSigner(keyPath, password)
	if err != nil {
		return err
	}
	d, opts, err := resolve(image)
	if err != nil {
		return err
	}
	if err := s.Sign(d, opts...); err != nil {
		return fmt.Errorf("pushing the signature of %s: %w", d, err)
	}
	fmt.Printf("Pushed signature for %s (key %s)\n", d, s.ID())
	return nil
}

// resolve is image by digest (the digest its tag names now), and the
// options to reach its registry.
func resolve(image string) (name.Digest, []remote.Option, error) {
	var nopts []name.Option
	if loopback(image) {
		nopts = append(nopts, name.Insecure) // the demo's registry speaks HTTP on loopback
	}
	ref, err := name.ParseReference(image, nopts...)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("parsing image %q: %w", image, err)
	}
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if d, ok := ref.(name.Digest); ok {
		return d, opts, nil
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("reading the digest of %s: %w (is the registry up, and the tag pushed? on the demo: . .stack/env, then $REGISTRY/helloworld:1.1.0)", image, err)
	}
	d, err := name.NewDigest(ref.Context().Name()+"@"+desc.Digest.String(), nopts...)
	return d, opts, err
}

// makeCA makes a test CA in dir, or reuses the one there, and writes its
// trusted root.
func makeCA(dir string) error {
	ca, err := cosigntest.LoadCA(dir)
	verb := "Reusing the test CA in"
	switch {
	case errors.Is(err, cosigntest.ErrNoCA):
		if ca, err = cosigntest.NewCA(); err != nil {
			return err
		}
		verb = "Made a test CA (not Fulcio) and a log key (not Rekor) in"
	case err != nil:
		return fmt.Errorf("reading the test CA: %w (remove %s to make a new one, then give fluxd the new trusted root)", err, dir)
	}
	if err := ca.Save(dir); err != nil {
		return fmt.Errorf("writing the test CA into %s: %w", dir, err)
	}
	fmt.Printf("%s %s, valid until %s\nTrusted root written to %s\n", verb, dir, ca.Expires().UTC().Format(time.DateOnly),
		filepath.Join(dir, cosigntest.TrustedRootFile))
	return nil
}

func keyless(dir, issuer, subject, image string) error {
	ca, err := cosigntest.LoadCA(dir)
	if errors.Is(err, cosigntest.ErrNoCA) {
		return fmt.Errorf("%w: run 'go run ./hack/sign ca %s' first", err, dir)
	}
	if err != nil {
		return fmt.Errorf("reading the test CA: %w", err)
	}
	if u, err := url.Parse(issuer); err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--issuer %q is not a URL: give the OIDC issuer, such as https://token.actions.githubusercontent.com", issuer)
	}
	if !strings.Contains(subject, "@") && !strings.Contains(subject, "://") {
		return fmt.Errorf("--subject %q is neither an e-mail nor a URI: give one, such as release@example.com or a workflow's https://github.com/org/app/.github/workflows/release.yml@refs/heads/main", subject)
	}
	d, opts, err := resolve(image)
	if err != nil {
		return err
	}
	now := time.Now()
	if err := ca.SignKeyless(d, cosigntest.Keyless{Issuer: issuer, Subject: subject, NotBefore: now.Add(-time.Minute)}, opts...); err != nil {
		return fmt.Errorf("pushing the keyless signature of %s: %w", d, err)
	}
	fmt.Printf("Pushed keyless signature for %s (issuer %s, subject %s; certificate valid until %s, logged by the test log)\n",
		d, issuer, subject, now.Add(9*time.Minute).UTC().Format(time.TimeOnly))
	return nil
}

// predicateTypes are cosign attest's --type names.
var predicateTypes = map[string]string{
	"spdxjson":         cosigntest.SPDX,
	"spdx":             cosigntest.SPDX,
	"cyclonedx":        cosigntest.CycloneDX,
	"slsaprovenance02": cosigntest.SLSAv02,
	"slsaprovenance":   cosigntest.SLSAv02,
	"slsaprovenance1":  cosigntest.SLSAv1,
}

func attest(keyPath string, password []byte, typ, predicateFile, image string) error {
	if t, ok := predicateTypes[typ]; ok {
		typ = t
	} else if u, err := url.Parse(typ); err != nil || u.Scheme == "" {
		return fmt.Errorf("--type %q is neither a URI nor one of cosign's names (spdxjson, spdx, cyclonedx, slsaprovenance02, slsaprovenance1)", typ)
	}
	var predicate any
	if predicateFile != "" {
		b, err := os.ReadFile(predicateFile)
		if err != nil {
			return fmt.Errorf("reading the predicate: %w", err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("the predicate %s is not a JSON object: %w (give an SBOM or provenance document as JSON)", predicateFile, err)
		}
		predicate = obj
	}
	s, err := cosigntest.LoadSigner(keyPath, password)
	if err != nil {
		return err
	}
	d, opts, err := resolve(image)
	if err != nil {
		return err
	}
	if err := s.Attest(d, typ, predicate, opts...); err != nil {
		return fmt.Errorf("pushing the attestation of %s: %w", d, err)
	}
	fmt.Printf("Pushed attestation %s for %s (key %s)\n", typ, d, s.ID())
	return nil
}

func loopback(image string) bool {
	for _, p := range []string{"127.", "localhost:", "localhost/", "[::1]"} {
		if strings.HasPrefix(image, p) {
			return true
		}
	}
	return false
}
