package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

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
