package daemon

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// BenchmarkAuthenticatedCallsDuringFlood measures what an unauthenticated
// connection flood does to callers with a token, at the default limits
// (1,024 connections, 64 per address). The flood holds 2,000 connections
// from 200 loopback addresses (127.0.10-11.x, 10 each) that never send a
// byte and reconnect as soon as the server closes them: the most churn
// this machine can make. Each iteration is a fluxctl-like call: a new
// connection from 127.0.0.2 and one authenticated Version call, given 5 s.
// A client connected and authenticated before the flood (the page's or a
// follower's kind) calls alongside. Reported: the share of calls that
// succeeded and their latencies.
//
//	go test -run '^$' -bench AuthenticatedCallsDuringFlood -benchtime 40x ./daemon/
func BenchmarkAuthenticatedCallsDuringFlood(b *testing.B) {
	for _, flood := range []int{0, 2000} {
		b.Run(fmt.Sprintf("flood=%d", flood), func(b *testing.B) { benchFlood(b, flood) })
	}
}

func benchFlood(b *testing.B, floodConns int) {
	addr, ctx, stop := serveStub(b, time.Second)
	defer func() { <-stop() }()
	auth := withToken("x")

	// The long-lived authenticated client, connected before the flood.
	kept, keptConn := benchClient(b, "127.0.0.3", addr)
	defer keptConn.Close()
	if _, err := kept.Version(auth, &fluxdv1.VersionRequest{}); err != nil {
		b.Fatal(err)
	}

	fctx, fcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	for i := range floodConns {
		from := fmt.Sprintf("127.0.%d.%d", 10+i/2000, 1+(i%2000)/10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			buf := make([]byte, 512)
			for fctx.Err() == nil {
				c, err := d.DialContext(fctx, "tcp", addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				c.Close()
			}
		}()
	}
	defer func() {
		fcancel()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	time.Sleep(2 * time.Second) // let the flood fill the limit

	var lat, keptLat []time.Duration
	ok, keptOK := 0, 0
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		c, conn := benchClient(b, "127.0.0.2", addr)
		cctx, cancel := context.WithTimeout(auth, 5*time.Second)
		_, err := c.Version(cctx, &fluxdv1.VersionRequest{})
		cancel()
		conn.Close()
		if err == nil {
			ok++
			lat = append(lat, time.Since(start))
		}
		start = time.Now()
		cctx, cancel = context.WithTimeout(auth, 5*time.Second)
		_, err = kept.Version(cctx, &fluxdv1.VersionRequest{})
		cancel()
		if err == nil {
			keptOK++
			keptLat = append(keptLat, time.Since(start))
		}
	}
	b.StopTimer()
	b.ReportMetric(100*float64(ok)/float64(b.N), "new-ok-%")
	b.ReportMetric(pct(lat, 50), "new-p50-ms")
	b.ReportMetric(pct(lat, 99), "new-p99-ms")
	b.ReportMetric(100*float64(keptOK)/float64(b.N), "kept-ok-%")
	b.ReportMetric(pct(keptLat, 99), "kept-p99-ms")
}

// pct is the p-th percentile of ds in milliseconds (0 for none).
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, len(ds)*p/100)]) / float64(time.Millisecond)
}

// benchClient is a fluxd client from the loopback address from.
func benchClient(b *testing.B, from, addr string) (fluxdv1.FluxServiceClient, *grpc.ClientConn) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		b.Fatal(err)
	}
	return fluxdv1.NewFluxServiceClient(conn), conn
}
