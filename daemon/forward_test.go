package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/testcerts"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// followerOf is a replica that follows the leader at addr.
type followerOf string

func (f followerOf) IsLeader() bool     { return false }
func (f followerOf) LeaderAddr() string { return string(f) }

// follower starts a follower's API with peer as its replica TLS set-up and
// returns a client and a deployer token.
func follower(t *testing.T, leader string, peer *tls.Config) (fluxdv1.FluxServiceClient, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	tok, err := auth.Create(path, auth.Identity{Instance: "team-a", Role: auth.Deployer})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := auth.Open(path)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := NewServer(New(Config{Listen: "bufconn:0", TokensFile: path}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{}}, log), store, log)
	srv.FollowLeader("follower", followerOf(leader), peer)
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel() })
	return fluxdv1.NewFluxServiceClient(conn), tok
}

// selfSigned returns a TLS certificate of a CA of its own, for name, and
// a pool that trusts it.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	ca := testcerts.NewCA(t, name)
	return ca.TLS, ca.Pool()
}

// Without replica TLS a follower forwards nothing: the caller is told to
// call the leader, whose address it names.
func TestFollowerWithoutReplicaTLSDoesNotForward(t *testing.T) {
	c, tok := follower(t, "10.0.0.7:3030", nil)
	_, err := c.Release(withToken(tok), &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "10.0.0.7:3030") {
		t.Fatalf("Release on a follower without replica TLS: %v; want FailedPrecondition naming the leader", err)
	}
	if _, err := c.ListServices(withToken(tok), &fluxdv1.ListServicesRequest{}); err != nil {
		t.Errorf("ListServices on the follower: %v; want its own answer", err)
	}
}

// With replica TLS, a "leader" whose certificate the replica CA did not
// sign (whoever wrote its address into the Lease) never sees the caller's
// token: the handshake fails before any request is sent.
func TestFollowerSendsNoTokenToAnUnverifiedLeader(t *testing.T) {
	impostorCert, _ := selfSigned(t, "fluxd-replica")
	_, replicaCA := selfSigned(t, "fluxd-replica")
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{impostorCert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var got atomic.Int64
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				n, _ := io.Copy(io.Discard, conn)
				got.Add(n)
			}()
		}
	}()
	c, tok := follower(t, lis.Addr().String(), &tls.Config{RootCAs: replicaCA, ServerName: "fluxd-replica", MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(withToken(tok), 5*time.Second)
	defer cancel()
	_, err = c.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Release forwarded to an impostor: %v; want Unavailable", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := got.Load(); n != 0 {
		t.Errorf("the impostor read %d bytes of application data; want none (the token must not be sent)", n)
	}
}
