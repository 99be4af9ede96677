package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a certificate for 127.0.0.1 signed by ca (self-signed
// CA when ca is nil) and its key, and returns them for signing more.
func writeCert(t *testing.T, dir, name string, isCA bool, usage []x509.ExtKeyUsage, caCert *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage, tmpl.ExtKeyUsage, tmpl.IPAddresses = x509.KeyUsageDigitalSignature, usage, []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"fluxd-replica"} // the name replicas check
	}
	parent, signer := tmpl, key
	if caCert != nil {
		parent, signer = caCert, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	return c, key
}

// fluxd serving TLS with client certificates required: fluxctl gets in
// with the CA and a client certificate, and each wrong set-up fails with a
// message that says what is wrong and what to do.
func TestFluxctlOverTLS(t *testing.T) {
	sharedFluxd(t)
	dir := t.TempDir()
	serverAuth, clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	caCert, caKey := writeCert(t, dir, "ca", true, nil, nil, nil)
	writeCert(t, dir, "server", false, serverAuth, caCert, caKey)
	writeCert(t, dir, "client", false, clientAuth, caCert, caKey)
	otherCA, otherKey := writeCert(t, dir, "other-ca", true, nil, nil, nil)
	writeCert(t, dir, "stranger", false, clientAuth, otherCA, otherKey)
	p := func(n string) string { return filepath.Join(dir, n) }
	pushManifest(t, "A directory for the TLS fluxd", map[string]string{"faults-tls/README.md": "no manifests here\n"})
	f := startFaultFluxd(t, "fluxd-tls", "faults-tls", nil, "--tls-cert-file="+p("server.crt"), "--tls-key-file="+p("server.key"), "--tls-client-ca-file="+p("ca.crt"))
	env := func(extra ...string) []string {
		return append([]string{"FLUX_TOKEN=" + f.Tokens["viewer"], "FLUX_TIMEOUT=10s"}, extra...)
	}
	for _, c := range []struct {
		name string
		env  []string
		want string // "" means success
	}{
		{"CA and client certificate", env("FLUX_URL=https://"+f.Addr, "FLUX_CA_FILE="+p("ca.crt"), "FLUX_CERT_FILE="+p("client.crt"), "FLUX_KEY_FILE="+p("client.key")), ""},
		{"certificate not trusted", env("FLUX_URL=https://"+f.Addr, "FLUX_CERT_FILE="+p("client.crt"), "FLUX_KEY_FILE="+p("client.key")), "presented a certificate fluxctl does not trust"},
		{"no client certificate", env("FLUX_URL=https://"+f.Addr, "FLUX_CA_FILE="+p("ca.crt")), "asks for a client certificate"},
		{"client certificate of another CA", env("FLUX_URL=https://"+f.Addr, "FLUX_CA_FILE="+p("ca.crt"), "FLUX_CERT_FILE="+p("stranger.crt"), "FLUX_KEY_FILE="+p("stranger.key")), "asks for a client certificate"},
		{"plaintext to the TLS port", env("FLUX_URL=" + f.Addr), "it may serve TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, code := fluxctl(t, c.env, "version")
			if c.want == "" {
				if code != 0 || !strings.Contains(out, "viewer") {
					t.Errorf("exit %d\n%s%s", code, out, stderr)
				}
				return
			}
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d; want an error saying %q:\n%s%s", code, c.want, out, stderr)
			}
		})
	}
	// And TLS spoken to a plaintext fluxd.
	plain := sharedFluxd(t)
	out, stderr, code := fluxctl(t, []string{"FLUX_URL=https://" + plain.Addr, "FLUX_TOKEN=" + plain.Tokens["viewer"], "FLUX_TIMEOUT=10s"}, "version")
	if code == 0 || !strings.Contains(stderr, "speaks plaintext") {
		t.Errorf("TLS to a plaintext fluxd: exit %d\n%s%s", code, out, stderr)
	}
}
