package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// atomicGenCluster is genCluster whose generation may change while
// other goroutines read it.
type atomicGenCluster struct {
	stubCluster
	gen atomic.Uint64
}

func (c *atomicGenCluster) Generation() uint64 { return c.gen.Load() }

// workloadsIn returns n workloads spread over namespaces ns-0 … ns-(spread-1).
func workloadsIn(n, spread int) []platform.Workload {
	ws := make([]platform.Workload, 0, n)
	for i := range n {
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: fmt.Sprintf("ns-%d", i%spread), Kind: "deployment", Name: fmt.Sprintf("app-%d", i)},
			Containers: []platform.Container{{Name: "app", Image: "reg.example/app:1.0"}}, Status: "ready"})
	}
	return ws
}

// Anyone with a viewer token can name any namespace: the kept view must
// not keep an answer for each, nor for more namespaces than the cap.
func TestViewKeepsNoAnswerForUnknownNamespaces(t *testing.T) {
	c := &genCluster{stubCluster: stubCluster{workloads: workloadsIn(1000, 500)}}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	for i := range 5000 {
		got, err := d.serviceProtos(ctx, fmt.Sprintf("nope-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Fatalf("namespace nope-%d: %d services, want none", i, len(got))
		}
	}
	d.view.mu.Lock()
	unknown := len(d.view.answers)
	d.view.mu.Unlock()
	if unknown != 0 {
		t.Errorf("after 5,000 calls naming namespaces that do not exist the view keeps %d answers, want 0", unknown)
	}
	for i := range 500 {
		got, err := d.serviceProtos(ctx, fmt.Sprintf("ns-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || cap(got) != 2 {
			t.Fatalf("namespace ns-%d: %d services (capacity %d), want 2 (2)", i, len(got), cap(got))
		}
	}
	d.view.mu.Lock()
	n := len(d.view.answers)
	d.view.mu.Unlock()
	if n > maxKeptNamespaces {
		t.Errorf("the view keeps answers for %d namespaces, want at most %d", n, maxKeptNamespaces)
	}
	if n == 0 {
		t.Errorf("the view keeps no answer at all")
	}
}

// Concurrent callers while the view changes (run with -race): each gets
// its namespace's services, all of them.
func TestListServicesWhileTheViewChanges(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(200, 10)}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				c.gen.Add(1)
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := withToken(f.tokens[auth.Viewer])
			for i := range 200 {
				ns := []string{"", "ns-1", "ns-2"}[(g+i)%3]
				resp, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns})
				if err != nil {
					t.Error(err)
					return
				}
				want := 200
				if ns != "" {
					want = 20
				}
				if len(resp.Services) != want {
					t.Errorf("ns %q: %d services", ns, len(resp.Services))
				}
				for _, s := range resp.Services {
					if ns != "" && s.Id[:len(ns)] != ns {
						t.Errorf("ns %q got %s", ns, s.Id)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
}

// A kept, encoded answer is dropped when the cluster changes.
func TestEncodedViewFollowsChanges(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(20, 10)}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	for _, ns := range []string{"", "ns-1"} {
		if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns}); err != nil {
			t.Fatal(err)
		}
	}
	ws := workloadsIn(20, 10)
	for i := range ws {
		ws[i].Status = "changed"
	}
	c.workloads = ws
	c.gen.Add(1)
	for _, ns := range []string{"", "ns-1"} {
		r, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Services {
			if s.Status != "changed" {
				t.Errorf("ns %q: stale %s %s", ns, s.Id, s.Status)
			}
		}
	}
}
