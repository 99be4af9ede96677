package daemon

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// RequireReplicaCerts sets the CAs that sign the replicas' certificates
// (--replica-ca-file). A call that says a replica forwarded it must come
// over a connection whose client certificate one of them signed;
// without them (nil), no call is taken as forwarded. Call before Serve.
func (s *Server) RequireReplicaCerts(cas *x509.CertPool) { s.replicaCAs = cas }

// RequireReplicaCerts is Server's, for notifications a follower passes
// on (X-Fluxd-Forwarded). Set before serving.
func (h *WebhookHandler) RequireReplicaCerts(cas *x509.CertPool) { h.replicaCAs = cas }

// errNotAReplica refuses a call marked forwarded that no replica
// certificate vouches for.
var errNotAReplica = errors.New("this call says another fluxd replica forwarded it, but its connection carries no certificate that the replica CA (--replica-ca-file) signed; forwarded calls are taken only from replicas")

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
	if !replicaCert(s.replicaCAs, chain) {
		s.log.Warn("refused a call marked as forwarded without a replica certificate")
		return status.Error(codes.Unauthenticated, errNotAReplica.Error())
	}
	return nil
}

// forwardedByReplica says whether a notification marked as passed on
// comes with a replica certificate.
func (h *WebhookHandler) forwardedByReplica(r *http.Request) bool {
	if r.TLS == nil {
		return false
	}
	return replicaCert(h.replicaCAs, r.TLS.PeerCertificates)
}

// replicaCert says whether chain's leaf is signed by cas, for client
// authentication. The listener's TLS may have verified it against a
// wider pool (--tls-client-ca-file too): this checks the replica CA
// alone.
func replicaCert(cas *x509.CertPool, chain []*x509.Certificate) bool {
	if cas == nil || len(chain) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}
