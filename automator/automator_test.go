package automator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func svc(name string) platform.ID {
	return platform.ID{Namespace: "default", Kind: "deployment", Name: name}
}

// fakePlanner is an in-memory release engine: workloads with one container
// each, and a registry whose newest tag the test sets per service.
type fakePlanner struct {
	annotations map[platform.ID]map[string]string
	current     map[platform.ID]string
	newest      map[platform.ID]string
	planErr     error
	plans       [][]platform.ID
	// installsInto are the namespaces a service installs into besides
	// its own (a HelmRelease's targetNamespace).
	installsInto map[platform.ID][]string
}

func newFake(names ...string) *fakePlanner {
	f := &fakePlanner{annotations: map[platform.ID]map[string]string{}, current: map[platform.ID]string{}, newest: map[platform.ID]string{}}
	for _, n := range names {
		f.annotations[svc(n)] = map[string]string{release.AnnotationAutomated: "true", release.AnnotationAutomatedBy: "team-a"}
		f.current[svc(n)], f.newest[svc(n)] = "1.0", "1.0"
	}
	return f
}

func (f *fakePlanner) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for id, ann := range f.annotations {
		m.Workloads[id] = &gitrepo.Definition{ID: id, Annotations: ann, Containers: []gitrepo.Container{{Name: "app", Image: "r/" + id.Name + ":" + f.current[id]}},
			InstallsInto: f.installsInto[id]}
	}
	return "rev", m, nil
}

func (f *fakePlanner) Plan(_ context.Context, spec release.Spec) (*release.Plan, error) {
	f.plans = append(f.plans, spec.Services)
	if f.planErr != nil {
		return nil, f.planErr
	}
	p := &release.Plan{Revision: "rev"}
	for _, id := range spec.Services {
		it := release.Item{Service: id, Action: release.UpToDate, Reason: release.ReasonNoNewer}
		if f.newest[id] != f.current[id] {
			it = release.Item{Service: id, Action: release.Update, Updates: []release.ContainerUpdate{{Container: "app", Current: "r/app:" + f.current[id], Target: "r/app:" + f.newest[id]}}}
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

// fakeJobs records queued jobs; the test ends them.
type fakeJobs struct {
	queued []history.Job
	specs  []release.Spec
}

func (j *fakeJobs) Enqueue(_ context.Context, instance string, spec release.Spec, _ string) (jobs.JobUpdate, error) {
	job := history.Job{ID: "job" + string(rune('1'+len(j.queued))), Instance: instance, State: history.JobQueued}
	j.queued, j.specs = append(j.queued, job), append(j.specs, spec)
	return jobs.JobUpdate{Job: job}, nil
}

func (j *fakeJobs) Get(_ context.Context, instance, id string) (jobs.JobUpdate, error) {
	for _, job := range j.queued {
		if job.ID == id && job.Instance == instance {
			return jobs.JobUpdate{Job: job}, nil
		}
	}
	return jobs.JobUpdate{}, errors.New("no such job")
}

func (j *fakeJobs) end(state history.JobState) { j.queued[len(j.queued)-1].State = state }

func newAutomator(t *testing.T, f *fakePlanner, jobs *fakeJobs, reg prometheus.Registerer) (*Automator, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	return New(Config{ShortWait: 15 * time.Second, LongWait: time.Minute, MaxBackoff: 2 * time.Minute, Metrics: reg}, f, jobs, clk, slog.New(slog.NewTextHandler(io.Discard, nil))), clk
}

func TestStateMachineBatchesReleases(t *testing.T) {
	f, jobs := newFake("a", "b", "c", "d"), &fakeJobs{}
	reg := prometheus.NewRegistry()
	a, clk := newAutomator(t, f, jobs, reg)
	ctx := context.Background()

	// Empty → Refreshing → nothing newer → UpToDate until the long wait.
	if next := a.Step(ctx); next != time.Minute {
		t.Errorf("after a check with nothing newer, next pass in %v, want 1m", next)
	}
	if got := a.States()[svc("a")]; got != UpToDate || len(jobs.queued) != 0 {
		t.Fatalf("state %s, jobs %v", got, jobs.queued)
	}
	if len(f.plans) != 1 || len(f.plans[0]) != 4 {
		t.Errorf("one plan should cover all four due services of the instance: %v", f.plans)
	}
	if got := testutil.ToFloat64(a.gauge.WithLabelValues("uptodate")); got != 4 {
		t.Errorf("gauge of up-to-date services = %v, want 4", got)
	}
	// Not due yet: no new check.
	clk.Step(30 * time.Second)
	a.Step(ctx)
	if len(f.plans) != 1 {
		t.Errorf("checked again before the wait was over")
	}
	// Three services get newer images; a kick (a notification) ends the
	// wait at once: one job, one batch, for the three.
	for _, n := range []string{"a", "b", "c"} {
		f.newest[svc(n)] = "1.1"
	}
	a.Kick()
	a.wakeAll()
	a.Step(ctx)
	if len(jobs.queued) != 1 {
		t.Fatalf("want one job for the batch, got %d", len(jobs.queued))
	}
	sp := jobs.specs[0]
	if len(sp.Services) != 3 || !sp.Automated || sp.User != User || jobs.queued[0].Instance != "team-a" || !strings.Contains(sp.Message, "default:deployment/a app=r/app:1.1") {
		t.Errorf("batched job spec %+v on %s", sp, jobs.queued[0].Instance)
	}
	st := a.Statuses()
	if st[svc("a")].State != Releasing || st[svc("a")].JobID != "job1" || st[svc("d")].State != UpToDate {
		t.Errorf("statuses %+v", st)
	}
	// While the job runs, the services stay Releasing and are not checked.
	plans := len(f.plans)
	clk.Step(2 * time.Minute)
	a.Step(ctx)
	if a.States()[svc("a")] != Releasing || len(jobs.queued) != 1 {
		t.Errorf("a running job must not be queued again: %v", a.States())
	}
	// The job ends: Waiting a short while, then checked again.
	for _, n := range []string{"a", "b", "c"} {
		f.current[svc(n)] = "1.1"
	}
	jobs.end(history.JobSucceeded)
	if next := a.Step(ctx); next > 15*time.Second {
		t.Errorf("after a release, next pass in %v, want at most the short wait", next)
	}
	if got := a.States()[svc("a")]; got != Waiting {
		t.Errorf("after the job: %s, want waiting", got)
	}
	if len(f.plans) == plans {
		t.Errorf("d was due and should have been checked")
	}
}

func TestFailuresBackOffPerService(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	a, clk := newAutomator(t, f, jobs, nil)
	ctx := context.Background()
	f.planErr = errors.New("git unreachable")
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		a.Step(ctx)
		waits = append(waits, a.Statuses()[svc("a")].Next.Sub(clk.Now()))
		if i < 4 {
			clk.Step(waits[len(waits)-1])
		}
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 2 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits after failures %v, want %v", waits, want)
		}
	}
	st := a.Statuses()[svc("a")]
	if st.State != Failing || st.Failures != 5 || !strings.Contains(st.LastError, "git unreachable") || st.Next.IsZero() {
		t.Errorf("status %+v", st)
	}
	// A kick does not cut a failing service's backoff short.
	plans := len(f.plans)
	clk.Step(time.Second)
	a.wakeAll()
	a.Step(ctx)
	if len(f.plans) != plans {
		t.Errorf("a kick retried a failing service before its backoff")
	}
	// Recovery resets the count.
	f.planErr = nil
	clk.Step(2 * time.Minute)
	a.Step(ctx)
	if st := a.Statuses()[svc("a")]; st.State != UpToDate || st.Failures != 0 {
		t.Errorf("after recovery: %+v", st)
	}
	// A failed release job is a failure too.
	f.newest[svc("a")] = "2.0"
	clk.Step(time.Minute)
	a.Step(ctx)
	jobs.end(history.JobFailed)
	a.Step(ctx)
	if st := a.Statuses()[svc("a")]; st.State != Failing || !strings.Contains(st.LastError, "release job job1 failed") {
		t.Errorf("after a failed job: %+v", st)
	}
}

func TestLockedOrDeautomatedServicesAreForgotten(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	a, clk := newAutomator(t, f, jobs, nil)
	ctx := context.Background()
	a.Step(ctx)
	f.annotations[svc("a")][release.AnnotationLocked] = "true"
	f.newest[svc("a")] = "2.0"
	clk.Step(time.Hour)
	a.Step(ctx)
	if _, ok := a.States()[svc("a")]; ok || len(jobs.queued) != 0 {
		t.Errorf("a locked service is still automated: %v, jobs %v", a.States(), jobs.queued)
	}
}

// A service automated by an instance whose scope does not hold it is not
// released: narrowing a scope stops the automator's releases there too.
func TestServicesOutsideTheAutomatingInstancesScopeAreNotReleased(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	f.newest[svc("a")] = "2.0"
	scopes := map[string]*auth.Scope{"team-a": {Namespaces: []string{"team-a"}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	a := New(Config{ShortWait: 15 * time.Second, LongWait: time.Minute, Scopes: func(inst string) *auth.Scope { return scopes[inst] }}, f, jobs, clk, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	a.Step(ctx)
	if _, ok := a.States()[svc("a")]; ok || len(jobs.queued) != 0 {
		t.Errorf("a service outside team-a's scope (namespace default) is automated: %v, jobs %v", a.States(), jobs.queued)
	}
	scopes["team-a"] = &auth.Scope{Namespaces: []string{"default"}}
	clk.Step(time.Hour)
	a.Step(ctx)
	if len(jobs.queued) != 1 {
		t.Errorf("within the scope, the new image was not released: jobs %v", jobs.queued)
	}
}

// A service in the automating instance's namespace that installs into
// another (a HelmRelease's spec.targetNamespace) is outside its scope as
// the release engine and the API see it: the automator does not release
// it either.
func TestServicesInstallingOutsideTheScopeAreNotReleased(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	f.newest[svc("a")] = "2.0"
	f.installsInto = map[platform.ID][]string{svc("a"): {"team-b"}}
	scopes := map[string]*auth.Scope{"team-a": {Namespaces: []string{"default"}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	a := New(Config{ShortWait: 15 * time.Second, LongWait: time.Minute, Scopes: func(inst string) *auth.Scope { return scopes[inst] }}, f, jobs, clk, slog.New(slog.DiscardHandler))
	a.Step(context.Background())
	if len(jobs.queued) != 0 {
		t.Errorf("a service installing into team-b, automated by team-a (scope default), was released: jobs %v", jobs.queued)
	}
}

func TestKickDuringAReleaseChecksAgainWhenItEnds(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	a, clk := newAutomator(t, f, jobs, nil)
	ctx := context.Background()
	a.Step(ctx)
	f.newest[svc("a")] = "1.1"
	a.wakeAll()
	a.Step(ctx)
	if a.States()[svc("a")] != Releasing {
		t.Fatalf("state %v", a.States())
	}
	// A notification while the job runs, then the job ends: the service
	// is due at once, not after the short wait.
	a.wakeAll()
	f.current[svc("a")], f.newest[svc("a")] = "1.1", "1.2"
	jobs.end(history.JobSucceeded)
	a.Step(ctx) // settles the job: due now
	a.Step(ctx) // checks: releases 1.2
	if len(jobs.queued) != 2 {
		t.Errorf("a notification during a release was lost: %d jobs, states %v", len(jobs.queued), a.States())
	}
	_ = clk
}

// Each pass tells OnChange, after the states it changed are readable:
// when it starts checking services (shown refreshing) and when it ends,
// with when the service was last looked at. A pass that changes nothing
// tells nothing and leaves Generation alone, so that the daemon keeps its
// view.
func TestOnChangeAfterEveryPass(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	a, clk := newAutomator(t, f, jobs, nil)
	var seen []Status
	a.OnChange(func() { seen = append(seen, a.Statuses()[svc("a")]) })
	a.Step(context.Background())
	clk.Step(time.Minute)
	a.Step(context.Background())
	if len(seen) != 4 || seen[0].State != Refreshing || seen[1].State != UpToDate || !seen[1].LastCheck.Equal(clk.Now().Add(-time.Minute)) ||
		seen[2].State != Refreshing || seen[3].State != UpToDate || !seen[3].LastCheck.Equal(clk.Now()) {
		t.Errorf("OnChange saw %+v", seen)
	}
	gen := a.Generation()
	a.Step(context.Background()) // nothing due
	if len(seen) != 4 || a.Generation() != gen {
		t.Errorf("a pass that changed nothing: OnChange told %d more times, Generation %d → %d", len(seen)-4, gen, a.Generation())
	}
}

// A service automated by an annotation that names no instance (Flux v1's
// fluxcd.io/automated, Keel's policy, or fluxd's own written by hand) is
// released under the one instance whose scope holds it, so that
// instance's tokens see the release in history; with several, or none,
// under DefaultInstance.
func TestUnnamedAutomationIsReleasedUnderTheInstanceThatHoldsIt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		instances map[string]*auth.Scope
		want      string
	}{
		{"one unscoped instance", map[string]*auth.Scope{"e2e": nil}, "e2e"},
		{"one of two holds it", map[string]*auth.Scope{"team-a": {Namespaces: []string{"team-a"}}, "ops": {Namespaces: []string{"default"}}}, "ops"},
		{"two hold it", map[string]*auth.Scope{"ops": nil, "e2e": nil}, "default"},
		{"none holds it", map[string]*auth.Scope{"team-a": {Namespaces: []string{"team-a"}}}, "default"},
		{"no tokens file", nil, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, jobs := newFake("a"), &fakeJobs{}
			delete(f.annotations[svc("a")], release.AnnotationAutomatedBy)
			f.newest[svc("a")] = "2.0"
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
			cfg := Config{ShortWait: 15 * time.Second, LongWait: time.Minute}
			if tc.instances != nil {
				cfg.Instances = func() map[string]*auth.Scope { return tc.instances }
			}
			a := New(cfg, f, jobs, clk, slog.New(slog.DiscardHandler))
			a.Step(context.Background())
			if len(jobs.queued) != 1 {
				t.Fatalf("no release queued: %v", jobs.queued)
			}
			if got := jobs.queued[0].Instance; got != tc.want {
				t.Errorf("released under instance %q, want %q", got, tc.want)
			}
		})
	}
}

// A service automated without naming an instance goes to the instance
// whose scope holds it by the same rule as the plan's (release.InScope):
// one holding its namespace but not the one it installs into does not
// take it (it would never release it), DefaultInstance does.
func TestUnnamedAutomationInstallingElsewhereGoesToTheDefaultInstance(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	delete(f.annotations[svc("a")], release.AnnotationAutomatedBy)
	f.newest[svc("a")] = "2.0"
	f.installsInto = map[platform.ID][]string{svc("a"): {"team-b"}}
	instances := map[string]*auth.Scope{"team-a": {Namespaces: []string{"default"}}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	cfg := Config{ShortWait: 15 * time.Second, LongWait: time.Minute, DefaultInstance: "default",
		Instances: func() map[string]*auth.Scope { return instances },
		Scopes:    func(inst string) *auth.Scope { return instances[inst] }}
	a := New(cfg, f, jobs, clk, slog.New(slog.DiscardHandler))
	a.Step(context.Background())
	if len(jobs.queued) != 1 || jobs.queued[0].Instance != "default" {
		t.Errorf("jobs %v; want one release under the default instance", jobs.queued)
	}
}

// Deautomated while its release job runs, with the kick of the deautomate
// marking it for a re-check: once the job ends the service is forgotten,
// not checked and released again (seen on make up: two release jobs
// queued after a deautomate, both finding nothing to do).
func TestDeautomatedDuringItsReleaseIsNotReleasedAgain(t *testing.T) {
	f, jobs := newFake("a"), &fakeJobs{}
	a, _ := newAutomator(t, f, jobs, nil)
	ctx := context.Background()
	a.Step(ctx)
	f.newest[svc("a")] = "1.1"
	a.wakeAll()
	a.Step(ctx)
	if a.States()[svc("a")] != Releasing {
		t.Fatalf("state %v", a.States())
	}
	// Deautomated (the kick marks it for a re-check), then the job ends
	// without having released anything.
	f.annotations[svc("a")][release.AnnotationAutomated] = "false"
	a.wakeAll()
	a.Step(ctx) // git no longer automates it; its job still runs
	f.newest[svc("a")] = "1.2"
	jobs.end(history.JobSucceeded)
	a.Step(ctx)
	a.Step(ctx)
	if len(jobs.queued) != 1 {
		t.Errorf("released again after it was deautomated: jobs %v", jobs.queued)
	}
	if _, ok := a.States()[svc("a")]; ok {
		t.Errorf("still tracked after its job ended: %v", a.States())
	}
}

// A pass where most services have nothing newer logs one line for them
// at info, with the count, and each service's decision at debug only;
// a decision to release is still logged per service.
func TestPassLogsNothingNewerOnce(t *testing.T) {
	f, jobs := newFake("a", "b", "c", "d"), &fakeJobs{}
	f.newest[svc("d")] = "1.1"
	var buf bytes.Buffer
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	a := New(Config{ShortWait: 15 * time.Second, LongWait: time.Minute}, f, jobs, clk, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	a.Step(context.Background())
	out := buf.String()
	if n := strings.Count(out, "nothing newer"); n != 1 || !strings.Contains(out, `msg="automator pass"`) || !strings.Contains(out, `"nothing newer"=3`) {
		t.Errorf("want one pass line counting 3 with nothing newer, got %d mentions:\n%s", n, out)
	}
	if !strings.Contains(out, "decision: release") || !strings.Contains(out, "service=default:deployment/d") {
		t.Errorf("the release decision is not logged per service:\n%s", out)
	}
}

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

// unverifiedPlanner is fakePlanner whose plans skip, for the services
// in skips, the newer images given as unverified (as release's
// olderVerified does).
type unverifiedPlanner struct {
	*fakePlanner
	skips map[string][]release.SkippedImage
}

func (p *unverifiedPlanner) Plan(ctx context.Context, spec release.Spec) (*release.Plan, error) {
	plan, err := p.fakePlanner.Plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	for i, it := range plan.Items {
		if sk := p.skips[it.Service.Name]; len(sk) > 0 {
			plan.Items[i].Action, plan.Items[i].Reason, plan.Items[i].Updates = release.Skip, release.ReasonUnverified, nil
			plan.Items[i].Warnings = []string{"app: skipped newer images that do not pass signature verification"}
			plan.Items[i].Unverified = sk
		}
	}
	return plan, nil
}

type recordedNotices struct {
	got  []history.Notice
	fail bool
}

func (r *recordedNotices) Notify(_ context.Context, n history.Notice) (int64, error) {
	if r.fail {
		return 0, errors.New("database is locked")
	}
	r.got = append(r.got, n)
	return int64(len(r.got)), nil
}

func skipped(tag, digest, outcome string) release.SkippedImage {
	return release.SkippedImage{Container: "app", Image: "r/app:" + tag,
		Verification: release.Verification{Outcome: outcome, Profiles: []string{"signed"}, Digest: digest, Detail: "profile signed: " + outcome}}
}

// A newer image skipped for its signatures is told of once per service
// and digest: not again on the next pass, again once its tag moves to
// another digest; a check that reached no verdict (a registry down) is
// not told of; a notice that could not be stored is tried again.
func TestAutomatorTellsOfUnverifiedImagesOnce(t *testing.T) {
	p := &unverifiedPlanner{fakePlanner: newFake("a", "b"), skips: map[string][]release.SkippedImage{
		"a": {skipped("1.2", "sha256:12", release.VerifyUnsigned), skipped("1.1", "sha256:11", release.VerifyFailed)},
		"b": {skipped("2.0", "", release.VerifyError)},
	}}
	notices := &recordedNotices{}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	a := New(Config{LongWait: time.Minute, Notices: notices}, p, &fakeJobs{}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	pass := func() {
		t.Helper()
		clk.Step(2 * time.Minute)
		a.Step(ctx)
	}

	a.Step(ctx)
	if len(notices.got) != 2 {
		t.Fatalf("first pass: %d notices, want one for each of a's 2 skipped images (none for b's check without a verdict): %+v", len(notices.got), notices.got)
	}
	for i, want := range []string{"r/app:1.2 (sha256:12)", "r/app:1.1 (sha256:11)"} {
		ev := notices.got[i].Event
		if ev.Type != history.UnverifiedSkipped || ev.Instance != "team-a" || len(ev.Services) != 1 || ev.Services[0] != svc("a").String() ||
			!strings.Contains(ev.Message, want) || ev.User != User {
			t.Errorf("notice %d: %+v, want one of a's skip of %s", i, ev, want)
		}
	}
	pass()
	if len(notices.got) != 2 {
		t.Errorf("the next pass told again: %d notices", len(notices.got))
	}
	// 1.2 moved to another digest, still unsigned: told of again.
	p.skips["a"][0] = skipped("1.2", "sha256:12b", release.VerifyUnsigned)
	pass()
	if len(notices.got) != 3 || !strings.Contains(notices.got[2].Event.Message, "sha256:12b") {
		t.Errorf("a moved tag's new digest was not told of once: %+v", notices.got[2:])
	}
	// A notice that cannot be stored is tried again on the next pass.
	p.skips["a"] = append(p.skips["a"], skipped("1.3", "sha256:13", release.VerifyUnsigned))
	notices.fail = true
	pass()
	notices.fail = false
	pass()
	if len(notices.got) != 4 || !strings.Contains(notices.got[3].Event.Message, "sha256:13") {
		t.Errorf("a notice that failed to be stored was not stored on the next pass: %+v", notices.got[3:])
	}
}
