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
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

const usage = `usage:
  COSIGN_PASSWORD=PW sign generate-key-pair [--output-key-prefix cosign]
  COSIGN_PASSWORD=PW sign sign --key cosign.key IMAGE`

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
	var opts []name.Option
	if loopback(image) {
		opts = append(opts, name.Insecure) // the demo's registry speaks HTTP on loopback
	}
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		return fmt.Errorf("parsing image %q: %w", image, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	d, ok := ref.(name.Digest)
	if !ok {
		desc, err := remote.Head(ref, auth)
		if err != nil {
			return fmt.Errorf("reading the digest of %s: %w", image, err)
		}
		if d, err = name.NewDigest(ref.Context().Name()+"@"+desc.Digest.String(), opts...); err != nil {
			return err
		}
	}
	if err := s.Sign(d, auth); err != nil {
		return fmt.Errorf("pushing the signature of %s: %w", d, err)
	}
	fmt.Printf("Pushed signature for %s (key %s)\n", d, s.ID())
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
