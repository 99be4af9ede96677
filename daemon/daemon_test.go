package daemon

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"maps"
	"sync"
	"sync/atomic"

	"fmt"

	"math/rand/v2"
	"slices"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// list-services reads Flux v1's and Keel's annotations as their policies
// and warns where two prefixes on one workload disagree (fluxd's own wins).
func TestServicesReadPeerAnnotations(t *testing.T) {
	const files = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: flux
  annotations:
    fluxcd.io/automated: "true"
    fluxcd.io/tag.flux: semver:~1.2
spec: {template: {spec: {containers: [{name: flux, image: reg/flux:1.2.0}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: keel
  annotations: {keel.sh/policy: minor}
spec: {template: {spec: {containers: [{name: keel, image: reg/keel:1.2.0}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: both
  annotations:
    fluxd.io/automated: "true"
    fluxcd.io/automated: "false"
    flux.weave.works/locked: "true"
    flux.weave.works/locked_msg: frozen
spec: {template: {spec: {containers: [{name: both, image: reg/both:1.2.0}]}}}
`
	defs, err := gitrepo.ParseFile("apps.yaml", []byte(files))
	if err != nil {
		t.Fatal(err)
	}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for _, def := range defs {
		m.Workloads[def.ID] = def
	}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &stubCluster{}, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss, err := d.Services(context.Background(), auth.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Service{}
	for _, s := range ss {
		got[s.ID.Name] = s
	}
	if s := got["flux"]; !s.Automated || s.Locked || s.Filters["flux"] != "semver:~1.2" || s.Filters["*"] != "glob:*" || len(s.Warnings) > 0 {
		t.Errorf("flux: automated=%v locked=%v filters=%v warnings=%q; want automated, semver:~1.2 for its container, glob:* for the rest, no warning",
			s.Automated, s.Locked, s.Filters, s.Warnings)
	}
	if s := got["keel"]; !s.Automated || s.Filters["*"] != "semver:minor" || len(s.Warnings) > 0 {
		t.Errorf("keel: automated=%v filters=%v warnings=%q; want automated with semver:minor, no warning", s.Automated, s.Filters, s.Warnings)
	}
	s := got["both"]
	if !s.Automated || !s.Locked || s.LockMsg != "locked: frozen" {
		t.Errorf("both: automated=%v locked=%v lock=%q; want fluxd's automation and the Flux v1 lock", s.Automated, s.Locked, s.LockMsg)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], `fluxcd.io/automated: "false" is overridden by fluxd.io/automated: "true"`) {
		t.Errorf("both: warnings = %q; want the disagreement on automation", s.Warnings)
	}
}

// list-services reads Flux v1's filter.fluxcd.io/<container> as the
// container's filter, and says what a Flux v1 annotation does not do, as
// fluxctl check does: a filter naming no container, an annotation fluxd
// does not read.
func TestServicesFluxV1FilterAndUnhonoured(t *testing.T) {
	const files = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: filtered
  annotations:
    fluxcd.io/automated: "true"
    filter.fluxcd.io/app: semver:~4.0
    filter.fluxcd.io/ap: semver:~5.0
    fluxcd.io/frobnicate: "yes"
spec: {template: {spec: {containers: [{name: app, image: reg/app:4.0.1}]}}}
`
	defs, err := gitrepo.ParseFile("apps.yaml", []byte(files))
	if err != nil {
		t.Fatal(err)
	}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for _, def := range defs {
		m.Workloads[def.ID] = def
	}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &stubCluster{}, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss, err := d.Services(context.Background(), auth.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("services %+v; want one", ss)
	}
	s := ss[0]
	if !s.Automated || s.Filters["app"] != "semver:~4.0" {
		t.Errorf("automated=%v filters=%v; want automated, semver:~4.0 for app", s.Automated, s.Filters)
	}
	all := strings.Join(s.Warnings, "\n")
	for _, want := range []string{`filter.fluxcd.io/ap names the container "ap"`, "Flux v1's fluxcd.io/frobnicate is not read by fluxd"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q; want one saying %q", s.Warnings, want)
		}
	}
	if len(s.Warnings) != 2 {
		t.Errorf("warnings %q; want 2", s.Warnings)
	}
}

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
