// Package replicacert says whether a connection's client certificate is a
// fluxd replica's: signed by the replica CA (--replica-ca-file). The gRPC
// API (calls a follower forwards) and the webhook listener (notifications
// a follower passes on) take a call marked as a replica's only so.
package replicacert

import (
	"crypto/x509"
	"errors"
)

// ErrNotAReplica refuses a call marked forwarded that no replica
// certificate vouches for.
var ErrNotAReplica = errors.New("this call says another fluxd replica forwarded it, but its connection carries no certificate that the replica CA (--replica-ca-file) signed; forwarded calls are taken only from replicas")

// Signed says whether chain's leaf is signed by cas, for client
// authentication. The listener's TLS may have verified it against a
// wider pool (--tls-client-ca-file too): this checks the replica CA
// alone. Without cas (nil), no chain is a replica's.
func Signed(cas *x509.CertPool, chain []*x509.Certificate) bool {
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
