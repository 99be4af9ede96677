package main

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/internal/testcerts"
	"github.com/fluxd/fluxd/platform"
)

// With --tls-client-ca-file the status page requires a client
// certificate as the API does; --web-allow-without-client-cert opts out.
func TestWebListenerRequiresClientCertsWithTheAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	ca.WriteFiles(t, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	ca.WriteLeaf(t, dir, testcerts.Leaf{Name: "server"})
	ca.WriteLeaf(t, dir, testcerts.Leaf{Name: "client"})
	p := func(n string) string { return filepath.Join(dir, n) }
	roots := ca.Pool()
	client, err := tls.LoadX509KeyPair(p("client.crt"), p("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	// handshake serves one connection on a listener made for f and says
	// whether a client with (or without) a certificate got through.
	handshake := func(f flags, withCert bool) error {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		lis, err := webListener(f, raw, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}()
		cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
		if withCert {
			cfg.Certificates = []tls.Certificate{client}
		}
		c, err := tls.Dial("tcp", raw.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3: the server's refusal of the client's (missing)
		// certificate shows at the first read.
		_, err = io.ReadAll(c)
		return err
	}
	var f flags
	f.tls = tlsFlags{certFile: p("server.crt"), keyFile: p("server.key"), clientCAFile: p("ca.crt")}
	if err := handshake(f, false); err == nil {
		t.Error("the status page took a client without a certificate while --tls-client-ca-file is set")
	}
	if err := handshake(f, true); err != nil {
		t.Errorf("the status page refused a client with a certificate signed by the CA: %v", err)
	}
	f.webAllowWithoutClientCert = true
	if err := handshake(f, false); err != nil {
		t.Errorf("with --web-allow-without-client-cert the page refused a client without a certificate: %v", err)
	}
}

// A notification's repository goes to the pages only when a service uses
// it; the comparison is by repository, whatever the tag or digest.
func TestNotifyOnlyForRepositoriesInUse(t *testing.T) {
	t.Parallel()
	svcs := []daemon.Service{{Containers: []platform.Container{{Name: "app", Image: "registry.example/team/app:1.2.0"}}}}
	if len(usesRepository(svcs, "registry.example/team/app")) == 0 {
		t.Error("a repository a service runs is not found")
	}
	for _, repo := range []string{"registry.example/team/secret", "registry.example/team", "team/app"} {
		if len(usesRepository(svcs, repo)) > 0 {
			t.Errorf("%s is taken for a repository in use", repo)
		}
	}
}
