package automator

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/release"
)

// specPlanner records the specs it plans.
type specPlanner struct {
	*fakePlanner
	specs []release.Spec
}

func (p *specPlanner) Plan(ctx context.Context, spec release.Spec) (*release.Plan, error) {
	p.specs = append(p.specs, spec)
	return p.fakePlanner.Plan(ctx, spec)
}

// A pass fetches git once (Manifests): its check plans the revision it
// read without fetching again; the release job it queues is no cached
// plan, and fetches when it runs.
func TestAPassFetchesOnce(t *testing.T) {
	f, jobs := newFake("a", "b"), &fakeJobs{}
	f.newest[svc("a")] = "1.1"
	p := &specPlanner{fakePlanner: f}
	a, _ := newAutomator(t, f, jobs, nil)
	a.plans = p
	a.Step(context.Background())
	if len(p.specs) != 1 || !p.specs[0].Cached {
		t.Fatalf("the pass's check planned %d times (cached: %v); want once, from the revision the pass read", len(p.specs), len(p.specs) == 1 && p.specs[0].Cached)
	}
	if len(jobs.specs) != 1 || jobs.specs[0].Cached {
		t.Errorf("queued %d jobs; want one, not a cached plan: %+v", len(jobs.specs), jobs.specs)
	}
	jobs.end(history.JobSucceeded)
}
