package daemon

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/automator"
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

// genAutomation is an automator that says when its states changed.
type genAutomation struct {
	mu       sync.Mutex
	statuses map[platform.ID]automator.Status
	gen      atomic.Uint64
}

func (a *genAutomation) Kick() {}
func (a *genAutomation) Statuses() map[platform.ID]automator.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.statuses)
}
func (a *genAutomation) Generation() uint64 { return a.gen.Load() }

// The kept view follows the automator's generation: a pass that marks a
// service refreshing (and moves the generation) is shown at once, and
// the view is kept while the generation stays.
func TestKeptViewShowsAutomatorChanges(t *testing.T) {
	c := &genCluster{stubCluster: stubCluster{workloads: workloadsIn(20, 2)}}
	id := c.workloads[0].ID
	a := &genAutomation{statuses: map[platform.ID]automator.Status{id: {State: automator.UpToDate}}}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}, Automator: a}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	state := func() string {
		t.Helper()
		svcs, err := d.serviceProtos(ctx, id.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range svcs {
			if s.GetId() == id.String() {
				return s.GetAutomation().GetState()
			}
		}
		t.Fatalf("%s not listed", id)
		return ""
	}
	if got := state(); got != string(automator.UpToDate) {
		t.Fatalf("state %q, want %q", got, automator.UpToDate)
	}
	built := d.view.built
	a.mu.Lock()
	a.statuses[id] = automator.Status{State: automator.Refreshing}
	a.mu.Unlock()
	a.gen.Add(1)
	if got := state(); got != string(automator.Refreshing) {
		t.Errorf("after the automator marked it refreshing: state %q", got)
	}
	for range 3 {
		state()
	}
	if n := d.view.built - built; n != 1 {
		t.Errorf("the view was built %d times for one change, want once", n)
	}
}
