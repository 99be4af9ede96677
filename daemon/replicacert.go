package daemon

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/replicacert"
)

// RequireReplicaCerts sets the CAs that sign the replicas' certificates
// (--replica-ca-file). A call that says a replica forwarded it must come
// over a connection whose client certificate one of them signed;
// without them (nil), no call is taken as forwarded. Call before Serve.
func (s *Server) RequireReplicaCerts(cas *x509.CertPool) { s.replicaCAs = cas }

// checkForwarded refuses a call marked as forwarded by a replica unless
// its connection presented a replica certificate.
func (s *Server) checkForwarded(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(forwardedHeader)) == 0 {
		return nil
	}
	var chain []*x509.Certificate
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			chain = ti.State.PeerCertificates
		}
	}
	if !replicacert.Signed(s.replicaCAs, chain) {
		s.log.Warn("refused a call marked as forwarded without a replica certificate")
		return status.Error(codes.Unauthenticated, replicacert.ErrNotAReplica.Error())
	}
	return nil
}
