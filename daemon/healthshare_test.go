package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// 10,000 health checks without a token cost at most one readiness check
// (a database ping) a second, and a release planned meanwhile is planned
// as without them.
func TestTenThousandHealthChecksCostAFewPings(t *testing.T) {
	reg := regtest.New(0)
	t.Cleanup(reg.Close)
	ctx := context.Background()
	if err := reg.PushVersions(ctx, reg.Host()+"/team/app", 0, 3, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var pings atomic.Int64
	f, _, _ := realReleaserWith(t, func(d *Deps) {
		d.Ready = func(context.Context) error { pings.Add(1); return nil }
	}, reg.Host()+"/team/app:"+regtest.Version(0))
	h := healthpb.NewHealthClient(f.conn)

	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	checks := make(chan struct{}, 10000)
	for range 10000 {
		checks <- struct{}{}
	}
	close(checks)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range checks {
				resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					failed.Add(1)
				}
			}
		}()
	}
	// A viewer's plan, during the flood.
	plan, err := f.client.Release(withToken(f.tokens[auth.Viewer]), &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN,
		Spec: &fluxdv1.ReleaseSpec{All: true, Image: reg.Host() + "/team/app:" + regtest.Version(2)}})
	wg.Wait()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("a plan during the flood: %v", err)
	}
	if n := len(plan.GetPlan().GetItems()); n != 1 || plan.GetPlan().GetItems()[0].GetAction() != "update" {
		t.Fatalf("a plan during the flood: %v", plan.GetPlan())
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of 10,000 health checks failed", n)
	}
	// One computation per second of the flood, and one more at its edge.
	if n, most := pings.Load(), int64(elapsed/time.Second)+2; n > most {
		t.Fatalf("10,000 health checks in %v made %d readiness checks (database pings), want at most %d", elapsed.Round(time.Millisecond), n, most)
	}
	t.Logf("10,000 health checks in %v: %d readiness checks", elapsed.Round(time.Millisecond), pings.Load())
}

// Many Watch streams share one ticker: they cost the checks of one. And
// they are bounded (maxHealthWatches), as each holds a connection busy
// without a token.
func TestHealthWatchStreamsShareOneTicker(t *testing.T) {
	var pings atomic.Int64
	f := newFixtureWith(t, Config{}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{},
		Ready: func(context.Context) error { pings.Add(1); return nil }})
	h := healthpb.NewHealthClient(f.conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, closeFirst := context.WithCancel(ctx)
	start := time.Now()
	for i := range maxHealthWatches {
		sctx := ctx
		if i == 0 {
			sctx = first
		}
		w, err := h.Watch(sctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := w.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("watch: %v %v", resp, err)
		}
	}
	elapsed := time.Since(start)
	if n, most := pings.Load(), int64(elapsed/time.Second)+2; n > most {
		t.Fatalf("%d Watch streams over %v made %d readiness checks, want at most %d", maxHealthWatches, elapsed.Round(time.Millisecond), n, most)
	}
	// One more is refused (it would hold its connection, with no
	// token); when one closes, another may open.
	w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Watch stream %d: %v, want ResourceExhausted", maxHealthWatches+1, err)
	}
	closeFirst()
	for try := 0; ; try++ {
		w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || try == 3000 {
			t.Fatalf("a Watch stream after one closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the server sees the close soon
	}
}

// The connection limit's tests (an unauthenticated newcomer closes the
// oldest unauthenticated connection; with every connection authenticated,
// one more waits) are in listener_test.go.
