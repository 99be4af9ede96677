package daemon

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// slowCluster takes its time to list (a big cluster), changes whenever
// told, and counts its listings (views built).
type slowCluster struct {
	atomicGenCluster
	delay time.Duration
	reads atomic.Int64
	extra atomic.Bool // lists one more workload
	fail  atomic.Bool // cannot be read
}

func (c *slowCluster) Workloads(ctx context.Context) ([]platform.Workload, error) {
	c.reads.Add(1)
	time.Sleep(c.delay)
	if c.fail.Load() {
		return nil, errors.New("the cluster's caches cannot be read")
	}
	ws, err := c.atomicGenCluster.Workloads(ctx)
	if c.extra.Load() {
		ws = append(ws[:len(ws):len(ws)], answerWorkloads("a/late")...)
	}
	return ws, err
}

// A cluster that changes at every call (status updates of thousands of
// workloads) does not make an expensive view be built at every call; what
// changed still shows, within the bound.
func TestClusterChurnDoesNotRebuildAnExpensiveViewAtEveryChange(t *testing.T) {
	c := &slowCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web", "b/db")}}, delay: 100 * time.Millisecond}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	list := func() string {
		t.Helper()
		ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return sortedIDs(ls)
	}
	list()
	before := c.reads.Load()
	for range 10 {
		c.gen.Add(1)
		list()
	}
	if built := c.reads.Load() - before; built > 5 {
		t.Errorf("10 calls, each after a change of the cluster, built the view %d times; want it reused while young (at most 5)", built)
	}
	// A new workload shows within the bound (10 times the build, at most
	// maxClusterLag).
	c.extra.Store(true)
	c.gen.Add(1)
	deadline := time.Now().Add(maxClusterLag + 5*time.Second)
	for !strings.Contains(list(), "a:deployment/late") {
		if time.Now().After(deadline) {
			t.Fatalf("a workload added to the cluster is not listed after %v", maxClusterLag+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A cheap view (what 1,000 workloads cost) is rebuilt at every change of
// the cluster, as before.
func TestCheapViewFollowsEveryClusterChange(t *testing.T) {
	c := &slowCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web")}}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); err != nil {
		t.Fatal(err)
	}
	c.extra.Store(true)
	c.gen.Add(1)
	ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(serviceIDs(ls), "a:deployment/late") {
		t.Errorf("the call right after a change lists %s, without the new workload", serviceIDs(ls))
	}
}

// freshReleaser reads git anew at every call (a new copy of the same
// revision, as release.Engine does).
type freshReleaser struct {
	stubReleaser
	reads atomic.Int64
}

func (r *freshReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	r.reads.Add(1)
	return "same-rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}, nil
}

// Reading git again and finding the same revision keeps the view: its
// manifests are the same, so nothing is rebuilt.
func TestSameRevisionReadAgainKeepsTheView(t *testing.T) {
	rel := &freshReleaser{}
	c := &genCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web")}}
	f := newFixtureWith(t, Config{GitRefresh: time.Nanosecond}, Deps{Cluster: c, Releaser: rel, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	for range 5 {
		if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	f.daemon.view.mu.Lock()
	built := f.daemon.view.built
	f.daemon.view.mu.Unlock()
	if rel.reads.Load() < 2 {
		t.Fatalf("git was read %d times; the test needs it read again", rel.reads.Load())
	}
	if built != 1 {
		t.Errorf("git read %d times at the same revision built the view %d times, want once", rel.reads.Load(), built)
	}
}

// countingJobs is a job queue that counts the jobs that ended.
type countingJobs struct {
	stubJobs
	n atomic.Uint64
}

func (j *countingJobs) Ended() uint64 { return j.n.Load() }

// A release that ended (its rollout followed to the end in the cluster's
// caches) shows in the next list-services at once, however expensive the
// view: the user who just released must not see the old state for up to
// maxClusterLag. A job's end is fluxd's own doing, as a change in git is.
func TestJobEndShowsItsClusterChangeAtOnce(t *testing.T) {
	c := &slowCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web")}}, delay: 100 * time.Millisecond}
	j := &countingJobs{}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: j})
	ctx := withToken(f.tokens[auth.Viewer])
	if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); err != nil {
		t.Fatal(err)
	}
	// The job's rollout moved the cluster, then the job ended.
	c.extra.Store(true)
	c.gen.Add(1)
	j.n.Add(1)
	ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(serviceIDs(ls), "a:deployment/late") {
		t.Errorf("the call right after a job ended lists %s, without what its rollout changed", serviceIDs(ls))
	}
}

// An expensive view past its young age is answered while the next one is
// built behind it, rather than every caller waiting for the build; the
// change shows once that build is done.
func TestAnOldViewAnswersWhileTheNextIsBuilt(t *testing.T) {
	c := &slowCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web")}}, delay: 100 * time.Millisecond}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	list := func() string {
		t.Helper()
		ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return serviceIDs(ls)
	}
	list()
	c.extra.Store(true)
	c.gen.Add(1)
	// Past young: ten times the build, which took at least 100 ms, at
	// most maxClusterLag.
	time.Sleep(maxClusterLag + 100*time.Millisecond)
	if got := list(); strings.Contains(got, "a:deployment/late") {
		t.Errorf("the first call after the view aged lists %s: it waited for the next build", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(list(), "a:deployment/late") {
		if time.Now().After(deadline) {
			t.Fatalf("a workload added to the cluster is not listed 5 s after the view aged")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Where the builds behind an old view keep failing, the old view answers
// for maxStaleView at most: then a caller builds it and is told why.
// Found by review: the old view answered for good, and hid the error.
func TestAnOldViewDoesNotHideFailingBuildsForGood(t *testing.T) {
	old := maxStaleView
	maxStaleView = maxClusterLag + time.Second
	t.Cleanup(func() { maxStaleView = old })
	c := &slowCluster{atomicGenCluster: atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/web")}}, delay: 100 * time.Millisecond}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Viewer])
	if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); err != nil {
		t.Fatal(err)
	}
	c.fail.Store(true)
	c.gen.Add(1)
	time.Sleep(maxClusterLag + 100*time.Millisecond)
	if _, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); err != nil {
		t.Errorf("a view past young, its next build failing behind it: %v; want the old view", err)
	}
	deadline := time.Now().Add(maxStaleView + 5*time.Second)
	for {
		_, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
		if err != nil {
			if !strings.Contains(err.Error(), "cannot be read") {
				t.Errorf("the error said: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old view still answers %v after it was built, its builds failing", maxStaleView+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
