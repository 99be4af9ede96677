package cosigntest

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// The files Save writes in a CA's directory. The root's own key is not
// kept: a CA made by NewCA never issues another intermediate.
const (
	caCertsFile     = "ca.pem"            // the intermediate, then the root
	caKeyFile       = "ca.key"            // the intermediate's key (PKCS #8, unencrypted)
	logKeyFile      = "log.key"           // the log's key (PKCS #8, unencrypted)
	TrustedRootFile = "trusted_root.json" // TrustedRootJSON, for a verification config
)

// Save writes the CA into dir (made if missing, 0700): its certificates,
// the intermediate's and the log's private keys (unencrypted, 0600: this
// is a test CA), and its trusted root (trusted_root.json). LoadCA reads
// it back, so a demo can sign again under the trusted root it wrote.
func (ca *CA) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certs, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{ca.intermediate, ca.root})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, caCertsFile), certs, 0o644); err != nil {
		return err
	}
	for file, k := range map[string]*ecdsa.PrivateKey{caKeyFile: ca.key, logKeyFile: ca.log} {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return err
		}
	}
	return ca.WriteTrustedRoot(filepath.Join(dir, TrustedRootFile))
}

// ErrNoCA is LoadCA's error for a directory that holds no saved CA.
var ErrNoCA = errors.New("no test CA saved there")

// LoadCA reads a CA that Save wrote into dir. A directory without one is
// ErrNoCA; one with damaged files says which.
func LoadCA(dir string) (*CA, error) {
	certsPEM, err := os.ReadFile(filepath.Join(dir, caCertsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (no %s)", dir, ErrNoCA, caCertsFile)
	}
	if err != nil {
		return nil, err
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM(certsPEM)
	if err != nil || len(certs) != 2 {
		return nil, fmt.Errorf("%s: want the intermediate and the root certificates, PEM (err: %v, %d certificates)", filepath.Join(dir, caCertsFile), err, len(certs))
	}
	ca := &CA{intermediate: certs[0], root: certs[1], start: certs[0].NotBefore, index: time.Now().Unix()}
	for file, k := range map[string]**ecdsa.PrivateKey{caKeyFile: &ca.key, logKeyFile: &ca.log} {
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s holds no PEM block", path)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s holds a %T, not an ECDSA key", path, key)
		}
		*k = ec
	}
	if !ca.key.PublicKey.Equal(ca.intermediate.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of the intermediate in %s", filepath.Join(dir, caKeyFile), filepath.Join(dir, caCertsFile))
	}
	der, err := x509.MarshalPKIXPublicKey(&ca.log.PublicKey)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(der)
	ca.logID = id[:]
	return ca, nil
}

// Expires is when the CA's certificates stop being valid.
func (ca *CA) Expires() time.Time {
	return ca.intermediate.NotAfter
}
