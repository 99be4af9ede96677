package e2e

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/testcerts"
)

// fluxd serving TLS with client certificates required: fluxctl gets in
// with the CA and a client certificate, and each wrong set-up fails with a
// message that says what is wrong and what to do.
func TestFluxctlOverTLS(t *testing.T) {
	sharedFluxd(t)
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	serverAuth, clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	ca, otherCA := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "other-ca")
	ca.WriteFiles(t, p("ca.crt"), "")
	ca.WriteLeaf(t, dir, testcerts.Leaf{Name: "server", Usage: serverAuth})
	ca.WriteLeaf(t, dir, testcerts.Leaf{Name: "client", Usage: clientAuth})
	otherCA.WriteLeaf(t, dir, testcerts.Leaf{Name: "stranger", Usage: clientAuth})
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
