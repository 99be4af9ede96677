package automator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// refusingPlanner plans as the engine does for a service fluxd will not
// release (outside --namespaces, or not permitted): skipped, refused.
type refusingPlanner struct {
	*fakePlanner
	refused map[platform.ID]string
	specs   []release.Spec
}

func (p *refusingPlanner) Plan(ctx context.Context, spec release.Spec) (*release.Plan, error) {
	p.specs = append(p.specs, spec)
	plan, err := p.fakePlanner.Plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	for i, it := range plan.Items {
		if why, ok := p.refused[it.Service]; ok {
			plan.Items[i] = release.Item{Service: it.Service, Action: release.Skip, Reason: why}
		}
	}
	return plan, nil
}

// A service the plan refuses (fluxd does not watch it, or may not patch
// it) is not released, and is not checked again on every pass nor at
// every notification: only after RefusedWait. The others of its batch go
// on as usual.
func TestRefusedServicesAreNotRetriedEveryPass(t *testing.T) {
	f := newFake("a", "b")
	f.newest[svc("a")], f.newest[svc("b")] = "1.1", "1.1"
	p := &refusingPlanner{fakePlanner: f, refused: map[platform.ID]string{
		svc("b"): release.ReasonNotWatched + ": default:deployment/b is in namespace default, and fluxd watches only other (--namespaces)"}}
	jobs := &fakeJobs{}
	a, clk := newAutomator(t, f, jobs, nil)
	a.plans = p
	ctx := context.Background()

	a.Step(ctx)
	if len(jobs.specs) != 1 || len(jobs.specs[0].Services) != 1 || jobs.specs[0].Services[0] != svc("a") {
		t.Fatalf("queued %+v; want one job releasing a alone", jobs.specs)
	}
	if !p.specs[0].Automated {
		t.Errorf("the check plans %+v; want it planned as the automated job will be", p.specs[0])
	}
	st := a.Statuses()[svc("b")]
	if !strings.HasPrefix(st.Decision, "refused: not watched") || st.State != UpToDate {
		t.Errorf("b: %+v; want it up to date, decision refused", st)
	}
	checks := func(id platform.ID) int {
		n := 0
		for _, ids := range f.plans {
			for _, x := range ids {
				if x == id {
					n++
				}
			}
		}
		return n
	}
	// Passes after the long wait, and notifications, do not ask again.
	jobs.end("succeeded")
	for range 4 {
		clk.Step(2 * time.Minute)
		a.Kick()
		a.wakeAll()
		a.Step(ctx)
	}
	if n := checks(svc("b")); n != 1 {
		t.Errorf("b checked %d times in 8 minutes of passes and kicks; want once until RefusedWait", n)
	}
	if n := checks(svc("a")); n < 2 {
		t.Errorf("a checked %d times; want it checked as usual", n)
	}
	// After RefusedWait it is asked again; once permitted, released.
	delete(p.refused, svc("b"))
	clk.Step(2 * time.Minute)
	a.Step(ctx)
	if n := checks(svc("b")); n != 2 {
		t.Errorf("b checked %d times after RefusedWait; want twice", n)
	}
	if st := a.Statuses()[svc("b")]; st.State != Releasing {
		t.Errorf("b once permitted: %+v; want it released", st)
	}
}
