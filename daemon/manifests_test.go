package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// stallingReleaser's Manifests hangs while stalled (a git remote that
// stopped answering), until its caller gives up.
type stallingReleaser struct {
	stubReleaser
	stalled atomic.Bool
	reads   atomic.Int32
}

func (r *stallingReleaser) Manifests(ctx context.Context) (string, *gitrepo.Manifests, error) {
	r.reads.Add(1)
	if r.stalled.Load() {
		<-ctx.Done()
		return "", nil, ctx.Err()
	}
	web := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	// A revision of its own: the push that added web.yaml (stubReleaser's
	// "rev" has no manifests).
	return "rev-with-web", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{web: {ID: web, File: "web.yaml"}}}, nil
}

// While the remote stalls, list-services answers from the last copy within
// staleWait, however many times it is called, and one background read at
// a time waits on the remote.
func TestServicesAnswerWhileGitStalls(t *testing.T) {
	rel := &stallingReleaser{}
	d := New(Config{GitRefresh: time.Millisecond}, Deps{Cluster: &stubCluster{}, Releaser: rel, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if s, err := d.Services(ctx, auth.Identity{}, ""); err != nil || len(s) != 1 {
		t.Fatalf("first read: %v, %+v", err, s)
	}
	rel.stalled.Store(true)
	time.Sleep(5 * time.Millisecond) // the copy is now stale
	for i := 0; i < 5; i++ {
		start := time.Now()
		s, err := d.Services(ctx, auth.Identity{}, "")
		if err != nil || len(s) != 1 || !s[0].InGit {
			t.Fatalf("during the stall: %v, %+v", err, s)
		}
		if took := time.Since(start); took > staleWait+2*time.Second {
			t.Errorf("call %d took %v during the stall", i, took)
		}
	}
	if n := rel.reads.Load(); n != 2 {
		t.Errorf("%d reads of git; want the first and one background read waiting on the stalled remote", n)
	}
}

// A policy command that names a service fluxd knows only from the cluster
// reads git again before refusing: its manifest may just have been pushed.
func TestResolveInGitReadsGitAgain(t *testing.T) {
	web := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	rel := &stallingReleaser{}
	d := New(Config{GitRefresh: time.Hour}, Deps{Cluster: &stubCluster{workloads: []platform.Workload{{ID: web}}}, Releaser: stubReleaser{}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if s, err := d.resolve(ctx, "web"); err != nil || s.InGit {
		t.Fatalf("before the push: %+v, %v", s, err)
	}
	d.deps.Releaser = rel // the manifest is pushed
	s, err := d.resolveInGit(ctx, "web")
	if err != nil || !s.InGit {
		t.Fatalf("after the push: %+v, %v; want it found in git", s, err)
	}
}

// manifestReleaser serves fixed manifests.
type manifestReleaser struct {
	stubReleaser
	m *gitrepo.Manifests
}

func (r manifestReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", r.m, nil
}

// Only a locked service carries a lock message: an unlocked one has none,
// so `list-services -o json` and the API do not say "locked" for it.
func TestLockMessageOnlyWhenLocked(t *testing.T) {
	free := platform.ID{Namespace: "default", Kind: "deployment", Name: "free"}
	held := platform.ID{Namespace: "default", Kind: "deployment", Name: "held"}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{
		free: {ID: free, File: "free.yaml", Annotations: map[string]string{}},
		held: {ID: held, File: "held.yaml", Annotations: map[string]string{
			release.AnnotationLocked: "true", release.AnnotationLockedBy: "alex", release.AnnotationLockMessage: "incident 42"}},
	}}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &stubCluster{}, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss, err := d.Services(context.Background(), auth.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range ss {
		got[s.ID.Name] = s.LockMsg
	}
	want := map[string]string{"free": "", "held": "locked by alex: incident 42"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock messages (-want +got):\n%s", diff)
	}
}
