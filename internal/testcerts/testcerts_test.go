package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
)

// A leaf verifies against its CA for 127.0.0.1 and its names, with the
// usage asked for; its files load as a key pair; another CA's pool
// refuses it.
func TestLeafVerifiesAgainstItsCA(t *testing.T) {
	t.Parallel()
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	dir := t.TempDir()
	leaf := ca.WriteLeaf(t, dir, Leaf{Name: "server", Serial: 7, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"fluxd-replica"}})
	if leaf.Cert.SerialNumber.Int64() != 7 {
		t.Errorf("serial = %d, want 7", leaf.Cert.SerialNumber.Int64())
	}
	for _, name := range []string{"127.0.0.1", "fluxd-replica"} {
		opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := leaf.Cert.Verify(opts); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "127.0.0.1"}); err == nil {
		t.Error("another CA's pool accepted the leaf")
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a server-only leaf verified for client authentication")
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")); err != nil {
		t.Errorf("the written files do not load as a key pair: %v", err)
	}
	// The CA's own pair serves as a self-signed certificate for its name.
	if _, err := ca.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "ca"}); err != nil {
		t.Errorf("the CA as a self-signed certificate: %v", err)
	}
}
