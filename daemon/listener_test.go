package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"fmt"
	"sync/atomic"

	"github.com/fluxd/fluxd/internal/clientkey"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// dialFrom is a gRPC client of addr whose connections come from the
// loopback address from (all of 127/8 is loopback on Linux).
func dialFrom(t *testing.T, from, addr string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// One client without a token cannot take every connection by holding
// health Watch streams (which keep a connection from ever being idle):
// beyond its per-address share its connections are closed, and a client
// from another address is still served.
func TestOneClientCannotHoldEveryConnection(t *testing.T) {
	addr, ctx, stop := serveStub(t, time.Second, WithMaxConnections(4), WithMaxConnectionsPerAddress(2))
	t.Cleanup(func() { <-stop() }) // after the clients' cleanups below

	// The flooder: one connection per Watch stream, as many as the cap.
	watching := 0
	for range 4 {
		h := healthpb.NewHealthClient(dialFrom(t, "127.0.0.1", addr))
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		w, err := h.Watch(wctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if err != nil {
			wcancel()
			continue
		}
		watching++
		t.Cleanup(wcancel) // the stream stays open until the test ends
	}
	if watching != 2 {
		t.Errorf("one address holds %d Watch streams, want its share of 2", watching)
	}

	// Someone else, from another address.
	h := healthpb.NewHealthClient(dialFrom(t, "127.0.0.2", addr))
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	if resp, err := h.Check(cctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("another client while one holds its share of connections: %v %v", resp, err)
	}
}

// A server holding its most connections still stops when asked (SIGTERM):
// gRPC's Stop waits for the listener's Accept to return before it closes
// connections, so an Accept waiting for a free connection must end.
func TestServerStopsWhileAtItsConnectionLimit(t *testing.T) {
	addr, ctx, stop := serveStub(t, 100*time.Millisecond, WithMaxConnections(2))
	for range 2 {
		h := healthpb.NewHealthClient(dialFrom(t, "127.0.0.1", addr))
		if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-stop():
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return a minute after it was asked to stop, holding its most connections")
	}
}

// serveStub serves a Daemon of stubs on a loopback port, with opts. stop
// ends Serve and returns the channel its error arrives on.
func serveStub(t testing.TB, grace time.Duration, opts ...ServerOption) (addr string, ctx context.Context, stop func() <-chan error) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := New(Config{}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{}}, log)
	srv := NewServer(d, oneToken("x"), log, opts...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, grace) }()
	return lis.Addr().String(), ctx, func() <-chan error { cancel(); return done }
}

// countingClient is a gRPC client of addr from the loopback address
// from, counting the connections it dials.
func countingClient(t *testing.T, from, addr string) (fluxdv1.FluxServiceClient, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return fluxdv1.NewFluxServiceClient(conn), &dials
}

// holdRaw opens a TCP connection from from to addr that never sends a
// byte: a connection that never authenticates.
func holdRaw(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer says whether the server closed c: a read ends in EOF
// (or a reset) rather than data or the deadline.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // the server's HTTP/2 settings
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}
}

// A flood of connections from many addresses that never show a token
// fills only the unauthenticated share of the connection limit: each new
// one closes the oldest unauthenticated one. A client that authenticated
// before the flood keeps its connection, and a new client that
// authenticates is still served. (Before, the flood filled the limit,
// and every new client waited in the backlog.)
func TestUnauthenticatedFloodCannotLockOutTokens(t *testing.T) {
	const limit = 8 // 2 kept for authenticated connections
	addr, _, stop := serveStub(t, time.Second, WithMaxConnections(limit), WithMaxConnectionsPerAddress(4))
	t.Cleanup(func() { <-stop() })
	auth := withToken("x")

	before, beforeDials := countingClient(t, "127.0.0.2", addr)
	if _, err := before.Version(auth, &fluxdv1.VersionRequest{}); err != nil {
		t.Fatalf("a call before the flood: %v", err)
	}
	// The flood: 60 connections from 20 addresses, 3 each (below the
	// per-address share), which never send a byte.
	var flood []net.Conn
	for i := range 60 {
		flood = append(flood, holdRaw(t, fmt.Sprintf("127.0.1.%d", 1+i%20), addr))
	}
	// Only the newest of them are still open: at most the unauthenticated
	// share, limit - limit/4.
	time.Sleep(100 * time.Millisecond)
	open := 0
	for _, c := range flood {
		if !closedByServer(c) {
			open++
		}
	}
	if open > limit-limit/keptShare {
		t.Errorf("%d of the flood's connections are open, want at most %d", open, limit-limit/keptShare)
	}
	// The authenticated client before the flood kept its connection.
	cctx, cancel := context.WithTimeout(auth, 5*time.Second)
	defer cancel()
	if _, err := before.Version(cctx, &fluxdv1.VersionRequest{}); err != nil {
		t.Fatalf("the client that authenticated before the flood, during it: %v", err)
	}
	if n := beforeDials.Load(); n != 1 {
		t.Errorf("the client that authenticated before the flood dialed %d times, want 1: the flood closed its connection", n)
	}
	// A new client with a token connects and is served.
	after, _ := countingClient(t, "127.0.0.3", addr)
	if _, err := after.Version(cctx, &fluxdv1.VersionRequest{}); err != nil {
		t.Fatalf("a new client with a token during the flood: %v", err)
	}
}

// When every connection of the limit has shown a token, a new one waits
// until one closes (rather than closing an authenticated one).
func TestAuthenticatedConnectionsAreNeverClosedForNewcomers(t *testing.T) {
	addr, ctx, stop := serveStub(t, time.Second, WithMaxConnections(4))
	t.Cleanup(func() { <-stop() })
	auth := withToken("x")
	var conns []*grpc.ClientConn
	for i := range 4 {
		conn := dialFrom(t, fmt.Sprintf("127.0.2.%d", i+1), addr)
		if _, err := fluxdv1.NewFluxServiceClient(conn).Version(auth, &fluxdv1.VersionRequest{}); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	h := healthpb.NewHealthClient(dialFrom(t, "127.0.2.9", addr))
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := h.Check(cctx, &healthpb.HealthCheckRequest{})
	ccancel()
	if err == nil {
		t.Fatal("a fifth connection was served while four authenticated ones were open")
	}
	conns[0].Close()
	cctx, ccancel = context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := h.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("after an authenticated connection closed: %v", err)
	}
	for _, conn := range conns[1:] {
		if _, err := fluxdv1.NewFluxServiceClient(conn).Version(auth, &fluxdv1.VersionRequest{}); err != nil {
			t.Errorf("an authenticated connection after the newcomer: %v", err)
		}
	}
}

// Connections from a trusted proxy (--trusted-proxies) carry many
// clients: they count against the limit, not one client's share. From
// any other address the share holds.
func TestTrustedProxyConnectionsAreNotLimitedPerAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		proxies []string
		want    int
	}{
		{"a trusted proxy", []string{"127.0.3.1"}, 5},
		{"not a trusted proxy", []string{"127.0.3.2"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := clientkey.ParseProxies(tc.proxies)
			if err != nil {
				t.Fatal(err)
			}
			addr, _, stop := serveStub(t, time.Second, WithMaxConnections(16), WithMaxConnectionsPerAddress(2), WithTrustedProxies(p))
			t.Cleanup(func() { <-stop() })
			var cs []net.Conn
			for range 5 {
				cs = append(cs, holdRaw(t, "127.0.3.1", addr))
			}
			time.Sleep(100 * time.Millisecond)
			open := 0
			for _, c := range cs {
				if !closedByServer(c) {
					open++
				}
			}
			if open != tc.want {
				t.Errorf("%d of 5 connections from 127.0.3.1 open, want %d", open, tc.want)
			}
		})
	}
}
