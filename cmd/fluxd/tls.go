package main

import (
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/spf13/pflag"

	"github.com/fluxd/fluxd/internal/tlsfiles"
)

// tlsFlags configure TLS on fluxd's listeners: the API, the webhooks and
// the metrics all serve the same certificate.
type tlsFlags struct {
	certFile, keyFile, clientCAFile string
}

func (t *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.certFile, "tls-cert-file", "", "PEM certificate to serve TLS with on every listener (re-read when the file changes); with --tls-key-file")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&t.clientCAFile, "tls-client-ca-file", "", "PEM CAs whose client certificates the listeners require (mutual TLS); none: no client certificate asked for")
}

func (t tlsFlags) enabled() bool { return t.certFile != "" || t.keyFile != "" }

// secure wraps lis in TLS when it is configured; otherwise it warns when
// lis is reachable beyond this host, since tokens and webhook secrets
// would cross the network in clear. nextProtos are offered by ALPN: "h2"
// for gRPC.
func (t tlsFlags) secure(lis net.Listener, what string, log *slog.Logger, nextProtos ...string) (net.Listener, error) {
	if !t.enabled() {
		if !loopback(lis.Addr()) {
			log.Warn("serving "+what+" in plaintext on a non-loopback address: tokens and secrets cross the network in clear; set --tls-cert-file and --tls-key-file, or keep it behind a TLS-terminating proxy", "address", lis.Addr().String())
		}
		return lis, nil
	}
	cfg, err := tlsfiles.Server(t.certFile, t.keyFile, t.clientCAFile, nextProtos...)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(lis, cfg), nil
}

func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
