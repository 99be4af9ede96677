package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
)

// gatedCluster counts the reads of its workloads and holds each until
// the gate opens.
type gatedCluster struct {
	atomicGenCluster
	reads atomic.Int32
	gate  chan struct{}
}

func (c *gatedCluster) Workloads(ctx context.Context) ([]platform.Workload, error) {
	c.reads.Add(1)
	<-c.gate
	return c.atomicGenCluster.Workloads(ctx)
}

// 50 callers that find the view stale at once (a change under load)
// share one build of it.
func TestStaleViewIsBuiltOnceForConcurrentCallers(t *testing.T) {
	c := &gatedCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(1000, 10)}}, gate: make(chan struct{})}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svcs, err := d.serviceProtos(ctx, "")
			if err != nil || len(svcs) != 1000 {
				t.Errorf("%d services, %v", len(svcs), err)
			}
		}()
	}
	for c.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the others arrive meanwhile
	close(c.gate)
	wg.Wait()
	if n := c.reads.Load(); n != 1 {
		t.Errorf("50 concurrent callers built the view %d times, want once", n)
	}
}
