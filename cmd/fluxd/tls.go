package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/pflag"

	"github.com/fluxd/fluxd/internal/tlsfiles"
)

// tlsFlags configure TLS on fluxd's listeners: the API, the webhooks and
// the metrics all serve the same certificate.
type tlsFlags struct {
	certFile, keyFile, clientCAFile string
	// replicaCAFile signs the replicas' certificates (mutual TLS between
	// replicas), which must name replicaServerName.
	replicaCAFile, replicaServerName string
}

func (t *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.certFile, "tls-cert-file", "", "PEM certificate to serve TLS with on every listener (re-read when the file changes); with --tls-key-file")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&t.clientCAFile, "tls-client-ca-file", "", "PEM CAs whose client certificates the API requires (mutual TLS; not the webhook and metrics listeners); none: no client certificate asked for")
	fs.StringVar(&t.replicaCAFile, "replica-ca-file", "", "with --leader-elect and --tls-cert-file: PEM CA that signs every replica's certificate; followers forward calls (with the caller's token) only to a leader whose certificate it signed, presenting their own")
	fs.StringVar(&t.replicaServerName, "replica-server-name", "fluxd-replica", "the DNS name every replica's certificate carries, checked when a follower connects to the leader (the address in the Lease may be anything)")
}

// peer returns the TLS set-up a follower uses towards the leader: the
// replica CA as the only root, the replica name, and this replica's own
// key pair as client certificate; nil without replica TLS.
func (t tlsFlags) peer() (*tls.Config, error) {
	if t.replicaCAFile == "" {
		return nil, nil
	}
	if !t.enabled() {
		return nil, errors.New("--replica-ca-file needs --tls-cert-file and --tls-key-file: the replicas serve and present that certificate to each other")
	}
	cfg, err := tlsfiles.Client(t.replicaCAFile, t.certFile, t.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--replica-ca-file: %w", err)
	}
	cfg.ServerName = t.replicaServerName
	return cfg, nil
}

func (t tlsFlags) enabled() bool { return t.certFile != "" || t.keyFile != "" }

// secure wraps lis in TLS when it is configured; otherwise it warns when
// lis is reachable beyond this host, since tokens and webhook secrets
// would cross the network in clear. nextProtos are offered by ALPN: "h2"
// for gRPC.
// clientCerts says whether --tls-client-ca-file applies: on the API, not
// on the webhook listener (registries such as Docker Hub send no client
// certificate) nor on metrics.
func (t tlsFlags) secure(lis net.Listener, what string, clientCerts bool, log *slog.Logger, nextProtos ...string) (net.Listener, error) {
	if !t.enabled() {
		if !loopback(lis.Addr()) {
			log.Warn("serving "+what+" in plaintext on a non-loopback address: tokens and secrets cross the network in clear; set --tls-cert-file and --tls-key-file, or keep it behind a TLS-terminating proxy", "address", lis.Addr().String())
		}
		return lis, nil
	}
	var clientCAs []string
	if t.clientCAFile != "" && clientCerts {
		// Replicas present their certificates as clients too.
		clientCAs = append(clientCAs, t.clientCAFile)
		if t.replicaCAFile != "" {
			clientCAs = append(clientCAs, t.replicaCAFile)
		}
	}
	cfg, err := tlsfiles.Server(t.certFile, t.keyFile, clientCAs, nextProtos...)
	if err != nil {
		return nil, err
	}
	if len(clientCAs) == 0 && t.replicaCAFile != "" {
		// Followers present their replica certificate: verify it when
		// given, while clients without one (fluxctl) still get in.
		if cfg.ClientCAs, err = tlsfiles.Pool(t.replicaCAFile); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tls.NewListener(lis, cfg), nil
}

func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
