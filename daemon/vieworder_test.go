package daemon

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
)

// A view rebuilt over the same services reuses the order of the view
// before; one over other services, even as many, is sorted again.
func TestRebuiltViewStaysSortedByID(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: workloadsIn(300, 7)}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := context.Background()
	rebuild := func(what string, ws []platform.Workload) {
		t.Helper()
		rand.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		c.workloads = ws
		c.gen.Add(1)
		f.daemon.view.mu.Lock()
		f.daemon.view.builtAt = time.Time{} // past its lag: built again now
		f.daemon.view.mu.Unlock()
		svcs, _, err := f.daemon.viewBuilt(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []platform.ID
		for _, s := range svcs {
			got = append(got, s.ID)
		}
		for _, w := range ws {
			want = append(want, w.ID)
		}
		slices.SortFunc(want, platform.ID.Compare)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the view lists %d services, not the %d in the cluster sorted by ID (first %v)", what, len(got), len(want), got[:min(3, len(got))])
		}
	}
	ws := workloadsIn(300, 7)
	rebuild("first view", slices.Clone(ws))
	ws[10].Status = "updating"
	rebuild("same services, one changed", slices.Clone(ws))
	ws[20].ID.Name = "app-0000" // as many services, one of them another
	rebuild("one service replaced by another", slices.Clone(ws))
	rebuild("one service gone", slices.Clone(ws[1:]))
	rebuild("one service back", slices.Clone(ws))
}
