// Package testcerts makes certificates for tests: a CA of the test's own
// and key pairs it signs for 127.0.0.1, in memory or written as PEM files
// (name.crt, name.key) where fluxd and fluxctl read them. It is the one
// place tests make certificates; fluxd itself never imports it.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pair is a certificate with its key, parsed, as PEM and as a
// tls.Certificate.
type Pair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
	TLS     tls.Certificate
}

// CA is a self-signed certificate authority valid for an hour either side
// of now. Its own pair names its common name as a DNS name and may serve
// or authenticate a client, so a test can also use it as a self-signed
// certificate.
type CA struct{ Pair }

// Leaf says what a certificate the CA issues is for. It always names
// 127.0.0.1.
type Leaf struct {
	Name     string             // the common name, and the file name for WriteLeaf
	Serial   int64              // 0: random
	Usage    []x509.ExtKeyUsage // nil: server and client authentication
	DNSNames []string           // names besides 127.0.0.1
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: serial(0), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return &CA{sign(t, tmpl, nil)}
}

// Pool is a certificate pool that trusts only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue signs a key pair for leaf.
func (ca *CA) Issue(t testing.TB, leaf Leaf) *Pair {
	t.Helper()
	usage := leaf.Usage
	if usage == nil {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(leaf.Serial), Subject: pkix.Name{CommonName: leaf.Name}, DNSNames: leaf.DNSNames,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	p := sign(t, tmpl, &ca.Pair)
	return &p
}

// WriteLeaf issues a pair for leaf and writes it as dir/NAME.crt and
// dir/NAME.key.
func (ca *CA) WriteLeaf(t testing.TB, dir string, leaf Leaf) *Pair {
	t.Helper()
	p := ca.Issue(t, leaf)
	p.WriteFiles(t, filepath.Join(dir, leaf.Name+".crt"), filepath.Join(dir, leaf.Name+".key"))
	return p
}

// WriteFiles writes the certificate and the key as PEM files, readable by
// their owner only.
func (p *Pair) WriteFiles(t testing.TB, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if keyFile == "" {
		return
	}
	if err := os.WriteFile(keyFile, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sign makes a new key and a certificate of tmpl for it, signed by parent
// (self-signed when parent is nil).
func sign(t testing.TB, tmpl *x509.Certificate, parent *Pair) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}
}

func serial(n int64) *big.Int {
	if n != 0 {
		return big.NewInt(n)
	}
	s, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return s
}
