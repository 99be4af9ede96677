package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// A call marked as forwarded by a replica is taken only over a
// connection whose client certificate the replica CA signed: not without
// one, and not with one only the API's client CA signed.
func TestForwardedCallsRequireAReplicaCertificate(t *testing.T) {
	serverCert, serverCA := selfSigned(t, "fluxd-replica")
	replicaCert, replicaCA := selfSigned(t, "fluxd-replica")
	userCert, userCA := selfSigned(t, "someone")
	_ = userCA
	// The listener trusts both CAs, as fluxd's does with
	// --tls-client-ca-file and --replica-ca-file.
	both := mergePools(t, replicaCert, userCert)

	path := filepath.Join(t.TempDir(), "tokens")
	tok, err := auth.Create(path, auth.Identity{Instance: "team-a", Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := auth.Open(path)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := NewServer(New(Config{Listen: "x", TokensFile: path}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{}}, log), store, log)
	srv.RequireReplicaCerts(replicaCA)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: both, ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: []string{"h2"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, time.Second) }()
	defer func() { cancel(); <-done }()

	cases := []struct {
		name      string
		cert      *tls.Certificate
		forwarded bool
		want      codes.Code
	}{
		{"forwarded, no certificate", nil, true, codes.Unauthenticated},
		{"forwarded, a user's certificate", &userCert, true, codes.Unauthenticated},
		{"forwarded, a replica's certificate", &replicaCert, true, codes.OK},
		{"not forwarded, no certificate", nil, false, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: serverCA, ServerName: "fluxd-replica", MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
			if tc.forwarded {
				cctx = metadata.AppendToOutgoingContext(cctx, forwardedHeader, "replica-x")
			}
			cctx, ccancel := context.WithTimeout(cctx, 10*time.Second)
			defer ccancel()
			_, err = fluxdv1.NewFluxServiceClient(conn).Version(cctx, &fluxdv1.VersionRequest{})
			if status.Code(err) != tc.want {
				t.Fatalf("Version: %v, want %v", err, tc.want)
			}
		})
	}

}

// mergePools is a pool of the given certificates' own (self-signed) CAs.
func mergePools(t *testing.T, certs ...tls.Certificate) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, c := range certs {
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		p.AddCert(x)
	}
	return p
}
