package grpcwindow

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestSizes: gRPC ignores a window under 64 KiB (its default, and the
// least HTTP/2 allows), and a stream window over the connection's would
// never be used whole.
func TestSizes(t *testing.T) {
	t.Parallel()
	const least = 64 << 10
	if StreamWindow < least || ConnWindow < least {
		t.Errorf("windows of %d and %d bytes: gRPC ignores a window under %d", StreamWindow, ConnWindow, least)
	}
	if StreamWindow > ConnWindow {
		t.Errorf("the stream window (%d) is over the connection window (%d)", StreamWindow, ConnWindow)
	}
	if ReadBuffer <= 0 {
		t.Errorf("read buffer of %d bytes: 0 or less turns buffering off", ReadBuffer)
	}
	if got := len(DialOptions()); got != 3 {
		t.Errorf("DialOptions returned %d options, want 3 (two windows and the read buffer)", got)
	}
}

// TestDialOptionsCall: a client with DialOptions calls a real server on
// loopback (gRPC's health service), so the options are ones gRPC takes
// and the connection works with them.
func TestDialOptionsCall(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check with DialOptions: %v", err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check: %v, want SERVING", resp.Status)
	}
}

// BenchmarkLargeAnswer times the first call of a new connection (as each
// fluxctl command makes) fetching a 4 MiB answer over loopback with 5 ms
// of latency each way. On a shared 2-core machine, 12 calls, twice:
// gRPC's defaults 142-152 ms a call, windows on the server only 141-142
// ms, DialOptions 27 ms.
//
//	go test -run '^$' -bench LargeAnswer -benchtime 20x ./internal/grpcwindow/
func BenchmarkLargeAnswer(b *testing.B) {
	for _, bc := range []struct {
		name   string
		dial   []grpc.DialOption
		server []grpc.ServerOption
	}{
		{"defaults", nil, nil},
		{"server windows", nil, []grpc.ServerOption{grpc.InitialWindowSize(StreamWindow), grpc.InitialConnWindowSize(ConnWindow)}},
		{"DialOptions", DialOptions(), nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := serveLargeAnswer(b, 4<<20, bc.server)
			for b.Loop() {
				b.StopTimer()
				conn := dialDelayed(b, addr, bc.dial)
				b.StartTimer()
				var in, out []byte
				if err := conn.Invoke(context.Background(), "/grpcwindow.Large/Get", &in, &out); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				conn.Close()
				b.StartTimer()
			}
		})
	}
}

// latency is the one-way delay of BenchmarkLargeAnswer's connections.
const latency = 5 * time.Millisecond

// serveLargeAnswer serves /grpcwindow.Large/Get, which answers size bytes,
// on loopback with latency on what the server sends.
func serveLargeAnswer(b *testing.B, size int, opts []grpc.ServerOption) string {
	answer := make([]byte, size)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}))...)
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: "grpcwindow.Large", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var in []byte
				return &answer, dec(&in)
			}}}}, struct{}{})
	go srv.Serve(delayedListener{lis})
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// dialDelayed returns a ready connection to addr with latency on what the
// client sends.
func dialDelayed(b *testing.B, addr string, opts []grpc.DialOption) *grpc.ClientConn {
	conn, err := grpc.NewClient("passthrough:///"+addr, append(opts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return delay(c), nil
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20)))...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			b.Fatalf("connecting to %s: still %v", addr, s)
		}
	}
	return conn
}

// rawCodec sends a *[]byte as it is, so the benchmark times transfer, not
// protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

type delayedListener struct{ net.Listener }

func (l delayedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return delay(c), nil
}

// delayedConn delivers what is written to it latency later, in order,
// without slowing the writer: a link with a round trip of 2×latency.
type delayedConn struct {
	net.Conn
	queue  chan delayedWrite
	closed chan struct{}
	once   sync.Once
}

type delayedWrite struct {
	at   time.Time
	data []byte
}

func delay(c net.Conn) net.Conn {
	d := &delayedConn{Conn: c, queue: make(chan delayedWrite, 1<<14), closed: make(chan struct{})}
	go func() {
		for {
			select {
			case w := <-d.queue:
				time.Sleep(time.Until(w.at.Add(latency)))
				if _, err := c.Write(w.data); err != nil {
					return
				}
			case <-d.closed:
				return
			}
		}
	}()
	return d
}

func (d *delayedConn) Write(p []byte) (int, error) {
	select {
	case d.queue <- delayedWrite{time.Now(), append([]byte(nil), p...)}:
		return len(p), nil
	case <-d.closed:
		return 0, net.ErrClosed
	}
}

func (d *delayedConn) Close() error {
	d.once.Do(func() { close(d.closed) })
	return d.Conn.Close()
}
