package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/testcerts"
)

// A rotated key pair (cert-manager rewriting the mounted files) is served
// from the next handshake on, without a restart; a client certificate is
// required when a client CA is set.
func TestServerReloadsRotatedCertificates(t *testing.T) {
	old := recheck
	recheck = 0
	defer func() { recheck = old }()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "test CA")
	caFile, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteFiles(t, caFile, "")
	issue := func(serial int64, certFile, keyFile string, usage x509.ExtKeyUsage) {
		ca.Issue(t, testcerts.Leaf{Name: "fluxd", Serial: serial, Usage: []x509.ExtKeyUsage{usage}}).WriteFiles(t, certFile, keyFile)
	}
	issue(10, cert, key, x509.ExtKeyUsageServerAuth)
	ccert, ckey := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	issue(20, ccert, ckey, x509.ExtKeyUsageClientAuth)

	srv, err := Server(cert, key, []string{caFile})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	serial := func(cfg *tls.Config) (int64, error) {
		c, err := tls.Dial("tcp", lis.Addr().String(), cfg)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if err := c.Handshake(); err != nil {
			return 0, err
		}
		// The server verifies the client after the client's handshake
		// returns: read to see its verdict.
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isEOF(err) {
			return 0, err
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
	}
	client, err := Client(caFile, ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := serial(client); err != nil || got != 10 {
		t.Fatalf("first certificate: serial %d, %v", got, err)
	}
	issue(11, cert, key, x509.ExtKeyUsageServerAuth)
	if got, err := serial(client); err != nil || got != 11 {
		t.Errorf("after the rotation: serial %d, %v; want the new certificate", got, err)
	}
	// A half-written file keeps the last good pair.
	os.WriteFile(cert, []byte("-----BEGIN CERT"), 0o600)
	if got, err := serial(client); err != nil || got != 11 {
		t.Errorf("with a broken file on disk: serial %d, %v; want the last good certificate", got, err)
	}
	noCert, _ := Client(caFile, "", "")
	if _, err := serial(noCert); err == nil {
		t.Error("a client without a certificate was accepted although a client CA is set")
	}
	other, _ := Client("", "", "")
	if _, err := serial(other); err == nil {
		t.Error("a client that does not trust the CA connected")
	}
}

func isEOF(err error) bool {
	ne, ok := err.(net.Error)
	return err.Error() == "EOF" || ok && ne.Timeout()
}

func TestErrors(t *testing.T) {
	if _, err := Server("a.crt", "", nil); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if _, err := Client(filepath.Join(t.TempDir(), "missing"), "", ""); err == nil {
		t.Error("a missing CA file was accepted")
	}
	if _, err := Client("", "c.crt", ""); err == nil {
		t.Error("a client certificate without a key was accepted")
	}
}

// A file rewritten in place, or renamed over, at the same size with its
// mtime put back (cp -p, touch -r) still counts as changed.
func TestStampSeesASameSizeRewriteWithMtimeKept(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(f, []byte("first-content"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(f)
	before := stampOf(f)
	time.Sleep(10 * time.Millisecond) // a later ctime on coarse clocks too
	for _, how := range []string{"in place", "renamed over"} {
		if how == "in place" {
			if err := os.WriteFile(f, []byte("other-content"), 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			tmp := filepath.Join(dir, "new")
			if err := os.WriteFile(tmp, []byte("third-content"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(f, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if after := stampOf(f); after == before {
			t.Errorf("%s: the stamp did not change (%s)", how, after)
		}
		before = stampOf(f)
	}
}
