package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/metadata"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"io"
	"log/slog"
)

// genCluster is a cluster that says when its workloads change, as
// platform/kube's informers do.
type genCluster struct {
	stubCluster
	gen uint64
}

func (c *genCluster) Generation() uint64 { return c.gen }

// BenchmarkListServices is ListServices over a real gRPC connection
// (bufconn) with 1,000 workloads: "rebuilt" joins and converts the view on
// every call (a cluster that cannot say when it changed, as every call
// did before the view was kept); "kept" reuses the view while nothing
// changed; "changing" has the cluster change before every call.
func BenchmarkListServices(b *testing.B) {
	var ws []platform.Workload
	for i := range 1000 {
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: fmt.Sprintf("ns-%d", i%10), Kind: "deployment", Name: fmt.Sprintf("app-%d", i)},
			Containers: []platform.Container{{Name: "app", Image: fmt.Sprintf("reg.example/team/app-%d:1.%d.0", i%200, i%7)}, {Name: "sidecar", Image: "reg.example/proxy:2.1"}},
			Status:     "ready", Replicas: platform.Replicas{Desired: 3, Updated: 3, Ready: 3, Available: 3}})
	}
	for _, bc := range []struct {
		name     string
		cluster  Cluster
		changing bool
		scoped   bool
	}{
		{"rebuilt", &stubCluster{workloads: ws}, false, false},
		{"kept", &genCluster{stubCluster: stubCluster{workloads: ws}}, false, false},
		{"changing", &genCluster{stubCluster: stubCluster{workloads: ws}}, true, false},
		// A caller whose instance is scoped to the 10 namespaces.
		{"kept-scoped", &genCluster{stubCluster: stubCluster{workloads: ws}}, false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixtureWith(b, Config{GitRefresh: time.Minute}, Deps{Cluster: bc.cluster, Releaser: stubReleaser{}, Jobs: stubJobs{}})
			if bc.scoped {
				scopeAll(b, f.tokensFile)
			}
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+f.tokens[auth.Viewer])
			b.ReportAllocs()
			for b.Loop() {
				if bc.changing {
					bc.cluster.(*genCluster).gen++
				}
				resp, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
				if err != nil || len(resp.Services) != 1000 {
					b.Fatalf("%d services, %v", len(resp.GetServices()), err)
				}
			}
		})
	}
}

// scopeAll scopes team-a to the benchmark's 10 namespaces.
func scopeAll(b *testing.B, tokensFile string) {
	fh, err := os.OpenFile(tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString("scope team-a namespaces=ns-0,ns-1,ns-2,ns-3,ns-4,ns-5,ns-6,ns-7,ns-8,ns-9\n"); err != nil {
		b.Fatal(err)
	}
}

// churnCluster is a cluster that changes while it is listed, and counts
// the views built from it.
type churnCluster struct {
	atomicGenCluster
	reads atomic.Int64
}

func (c *churnCluster) Workloads(ctx context.Context) ([]platform.Workload, error) {
	c.reads.Add(1)
	return c.atomicGenCluster.Workloads(ctx)
}

// BenchmarkListServicesChurn is ListServices from 50 concurrent clients
// while the cluster changes every 10 ms (rollouts, the automator's
// passes): callers that find the view stale share one build of it.
// views-built/s is how often the view was joined again.
func BenchmarkListServicesChurn(b *testing.B) {
	c := &churnCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(1000, 10)}}}
	f := newFixtureWith(b, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+f.tokens[auth.Viewer])
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.gen.Add(1)
			}
		}
	}()
	b.ReportAllocs()
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
			if err != nil || len(resp.Services) != 1000 {
				b.Errorf("%d services, %v", len(resp.GetServices()), err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	close(stop)
	<-done
	b.ReportMetric(float64(c.reads.Load())/elapsed.Seconds(), "views-built/s")
	b.ReportMetric(float64(c.gen.Load())/elapsed.Seconds(), "changes/s")
}

// BenchmarkListServicesJSON is the JSON API's ListServices of 1,000
// workloads, kept view, in process as the web page calls it: "gateway"
// is what grpc-gateway did with each answer (decode the protobuf, encode
// it as JSON with protojson); "kept" asks the server for its kept JSON.
func BenchmarkListServicesJSON(b *testing.B) {
	ws := workloadsIn(1000, 10)
	f := newFixtureWith(b, Config{GitRefresh: time.Minute}, Deps{Cluster: &genCluster{stubCluster: stubCluster{workloads: ws}}, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+f.tokens[auth.Viewer])
	b.Run("gateway", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
			if err != nil || len(resp.Services) != 1000 {
				b.Fatalf("%d services, %v", len(resp.GetServices()), err)
			}
			if _, err := jsonOptions.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		jctx := metadata.AppendToOutgoingContext(ctx, AnswerHeader, "json")
		codec := grpc.ForceCodecV2(bytesCodec{encoding.GetCodecV2(grpcproto.Name)})
		for b.Loop() {
			var out []byte
			if err := f.conn.Invoke(jctx, fluxdv1.FluxService_ListServices_FullMethodName, &fluxdv1.ListServicesRequest{}, &out, codec); err != nil || len(out) < 1000 {
				b.Fatalf("%d bytes, %v", len(out), err)
			}
		}
	})
}

// BenchmarkListServicesAfterChange is one ListServices (gRPC, and the
// JSON API's) after one workload of N changed: the view is joined again
// (the view is made older than its lag, viewlag.go, as under steady
// churn), and its answer made from the services' kept forms where they
// did not change. Its cost per op is a whole view's; compare 1000 with
// 10000 to see how it grows.
func BenchmarkListServicesAfterChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, api := range []string{"grpc", "json"} {
			b.Run(fmt.Sprintf("%s/%d", api, n), func(b *testing.B) {
				c := &atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(n, n/100)}}
				f := newFixtureWith(b, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
				ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+f.tokens[auth.Viewer])
				codec := grpc.ForceCodecV2(bytesCodec{encoding.GetCodecV2(grpcproto.Name)})
				if api == "json" {
					ctx = metadata.AppendToOutgoingContext(ctx, AnswerHeader, "json")
				}
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					ws := c.workloads
					w := &ws[i%len(ws)]
					w.Status = map[string]string{"ready": "updating", "updating": "ready"}[w.Status]
					c.gen.Add(1)
					f.daemon.view.mu.Lock()
					// Old and cheap: rebuilt by this call, not answered
					// while a build runs behind it.
					f.daemon.view.builtAt, f.daemon.view.cost = time.Time{}, 0
					f.daemon.view.mu.Unlock()
					i++
					var out []byte
					if err := f.conn.Invoke(ctx, fluxdv1.FluxService_ListServices_FullMethodName, &fluxdv1.ListServicesRequest{}, &out, codec, grpc.MaxCallRecvMsgSize(128<<20)); err != nil || len(out) < n {
						b.Fatalf("%d bytes, %v", len(out), err)
					}
				}
			})
		}
	}
}

// BenchmarkBuildServices joins the view once, as a rebuild after a change
// of the cluster does: N workloads in the cluster and in git, each
// automated under semver:^1, as make bench-scale sets them.
func BenchmarkBuildServices(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ws := workloadsIn(n, n/100)
			m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
			for _, w := range ws {
				doc := fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  namespace: %s\n  annotations:\n    fluxd.io/automated: \"true\"\n    fluxd.io/tag-all: \"semver:^1\"\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: reg.example/app:1.0\n", w.ID.Name, w.ID.Namespace)
				defs, err := gitrepo.ParseFile(w.ID.Namespace+".yaml", []byte(doc))
				if err != nil || len(defs) != 1 {
					b.Fatalf("%v %v", defs, err)
				}
				m.Workloads[defs[0].ID] = defs[0]
			}
			d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &genCluster{stubCluster: stubCluster{workloads: ws}}, Releaser: stubReleaser{}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				svcs, err := d.buildServices(ctx, m)
				if err != nil || len(svcs) != n || len(svcs[0].Filters) != 1 {
					b.Fatalf("%d services, %v", len(svcs), err)
				}
			}
		})
	}
}
