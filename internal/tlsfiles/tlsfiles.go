// Package tlsfiles makes TLS configurations from PEM files: fluxd's
// listeners serve the certificate in a pair of files and pick up a new
// one when the files change on disk (as cert-manager rewrites a mounted
// Secret), without a restart; fluxctl trusts a CA file and may present a
// client certificate.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/filestamp"
)

// Server returns a server configuration that serves the key pair in
// certFile and keyFile, re-read when either file changes, and, when
// clientCAFiles are given, requires client certificates signed by a CA in
// one of them. nextProtos are offered by ALPN ("h2" for gRPC).
func Server(certFile, keyFile string, clientCAFiles []string, nextProtos ...string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert-file and --tls-key-file go together: give both")
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.current() },
		NextProtos:     nextProtos,
	}
	if len(clientCAFiles) > 0 {
		pool, err := pool(clientCAFiles...)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client returns a client configuration that trusts the CAs in caFile (the
// system's when empty) and presents the key pair in certFile and keyFile
// when both are set.
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		p, err := pool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = p
	}
	switch {
	case certFile != "" && keyFile != "":
		kp := &keyPair{certFile: certFile, keyFile: keyFile}
		if _, err := kp.load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.current() }
	case certFile != "" || keyFile != "":
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	return cfg, nil
}

// Pool reads the PEM certificates of files into a pool.
func Pool(files ...string) (*x509.CertPool, error) { return pool(files...) }

func pool(files ...string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		if !p.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("the CA file %s holds no PEM certificate", file)
		}
	}
	return p, nil
}

// keyPair is a certificate and key on disk, re-read when either file's
// size or modification time changes. A rewrite that does not parse (a
// half-written file) keeps the pair in use until a good one appears.
type keyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// recheck bounds how often the files are looked at under load.
var recheck = time.Second

func (k *keyPair) current() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.checked) < recheck && k.cert != nil {
		return k.cert, nil
	}
	k.checked = time.Now()
	if stamp := stampOf(k.certFile, k.keyFile); stamp != k.stamp {
		if c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile); err == nil {
			k.cert, k.stamp = &c, stamp
		}
	}
	return k.cert, nil
}

func (k *keyPair) load() (*tls.Certificate, error) {
	stamp := stampOf(k.certFile, k.keyFile)
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS key pair %s, %s: %w", k.certFile, k.keyFile, err)
	}
	k.mu.Lock()
	k.cert, k.stamp, k.checked = &c, stamp, time.Now()
	k.mu.Unlock()
	return &c, nil
}

// stampOf says when the files last changed (filestamp: size and mtime,
// and the device, inode and change time, which no user can set). A
// rewrite of the same size with its mtime put back (cp -p, touch -r) was
// missed by size and mtime alone.
func stampOf(files ...string) string {
	var s string
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%+v;", filestamp.Of(fi))
		}
	}
	return s
}
