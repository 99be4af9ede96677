package automator

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

var app = platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}

// fakeReleaser is an in-memory release engine: a workload with one
// container, and a registry whose newest tag the test sets.
type fakeReleaser struct {
	annotations map[string]string
	current     string
	newest      string
	executed    []string // instance:type per Execute
	plans       int
}

func (f *fakeReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{
		app: {ID: app, Annotations: f.annotations, Containers: []gitrepo.Container{{Name: "app", Image: "r/app:" + f.current}}},
	}}, nil
}

func (f *fakeReleaser) plan() *release.Plan {
	it := release.Item{Service: app, Action: release.UpToDate, Reason: release.ReasonNoNewer}
	if f.newest != f.current {
		it = release.Item{Service: app, Action: release.Update, Updates: []release.ContainerUpdate{{Container: "app", Current: "r/app:" + f.current, Target: "r/app:" + f.newest}}}
	}
	return &release.Plan{Revision: "rev", Items: []release.Item{it}}
}

func (f *fakeReleaser) Plan(context.Context, release.Spec) (*release.Plan, error) {
	f.plans++
	return f.plan(), nil
}

func (f *fakeReleaser) Execute(_ context.Context, instance string, spec release.Spec, typ history.Type, _ release.ExecOptions) (*release.Result, error) {
	p := f.plan()
	f.executed = append(f.executed, instance+":"+string(typ)+":"+spec.User)
	res := &release.Result{Plan: p}
	if p.Updates() > 0 {
		res.Commit = "c-" + f.newest
		f.current = f.newest
	}
	return res, nil
}

func TestStateMachine(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	f := &fakeReleaser{annotations: map[string]string{release.AnnotationAutomated: "true", release.AnnotationAutomatedBy: "team-a"}, current: "1.0", newest: "1.0"}
	a := New(Config{ShortWait: 15 * time.Second, LongWait: time.Minute}, f, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	// Empty → refresh → UpToDate → nothing newer → Waiting (long).
	if next := a.Step(ctx); next != time.Minute {
		t.Errorf("after a check with nothing newer, next pass in %v, want 1m", next)
	}
	if got := a.States()[app]; got != Waiting || len(f.executed) != 0 {
		t.Fatalf("state %s, executed %v", got, f.executed)
	}
	// Not due yet: no new check.
	clk.Step(30 * time.Second)
	plans := f.plans
	a.Step(ctx)
	if f.plans != plans {
		t.Errorf("checked again before the wait was over")
	}
	// A newer tag appears; once the wait is over: refresh → Releasing →
	// release → Waiting (short).
	f.newest = "1.1"
	clk.Step(30 * time.Second)
	if next := a.Step(ctx); next != 15*time.Second {
		t.Errorf("after a release, next pass in %v, want 15s", next)
	}
	if len(f.executed) != 1 || f.executed[0] != "team-a:automated-release:automator" || f.current != "1.1" {
		t.Fatalf("executed %v, current %s", f.executed, f.current)
	}
	// Deautomated: forgotten.
	f.annotations = map[string]string{release.AnnotationAutomated: "false"}
	clk.Step(15 * time.Second)
	a.Step(ctx)
	if _, ok := a.States()[app]; ok {
		t.Errorf("a deautomated service is still tracked: %v", a.States())
	}
}

func TestLockedServicesAreNotReleased(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	f := &fakeReleaser{annotations: map[string]string{release.AnnotationAutomated: "true", release.AnnotationLocked: "true"}, current: "1.0", newest: "2.0"}
	a := New(Config{}, f, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.Step(context.Background())
	if len(f.executed) != 0 || len(a.States()) != 0 {
		t.Fatalf("locked service: executed %v, states %v", f.executed, a.States())
	}
}
