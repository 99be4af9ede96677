package release

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// timesOutAfterPush is a remote that takes a push and then times out
// before saying so (a proxy or a slow hook): the push landed, and the
// client saw an error.
type timesOutAfterPush struct{ *gogit.Repo }

func (r timesOutAfterPush) Push(ctx context.Context, commit string) error {
	if err := r.Repo.Push(ctx, commit); err != nil {
		return err
	}
	return fmt.Errorf("pushing: %w", context.DeadlineExceeded)
}

// A lock whose push reported an error but reached the remote is recorded
// as the lock it is, not as a failure.
func TestPolicyPushThatLandedIsRecordedAsDone(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	g.e.repo = timesOutAfterPush{g.repo}
	commit, err := g.e.SetPolicy(context.Background(), "team", PolicyChange{Service: id("web"), Set: map[string]string{AnnotationLocked: "true"}, Type: history.Lock, User: "dana"})
	if err != nil {
		t.Fatalf("SetPolicy: %v; want the landed push carried on", err)
	}
	if head := gitCLI(t, g.bare, "rev-parse", "main"); head != commit {
		t.Errorf("SetPolicy returned %.12s, the remote is at %.12s", commit, head)
	}
	if !strings.Contains(g.remoteFile(t, "web.yaml"), `fluxd.io/locked: "true"`) {
		t.Fatalf("the remote's web.yaml is not locked:\n%s", g.remoteFile(t, "web.yaml"))
	}
	evs := g.events(t)
	if len(evs) != 1 || evs[0].Type != history.Lock || evs[0].Error != "" || evs[0].Commit != commit {
		t.Errorf("history = %+v; want one lock row with the commit and no error", evs)
	}
}

// cancelsDuringCommit makes the user's cancel arrive while the release
// commits, before its push.
type cancelsDuringCommit struct {
	*gogit.Repo
	cancel context.CancelCauseFunc
}

func (r cancelsDuringCommit) Commit(ctx context.Context, base string, files map[string][]byte, msg string, author gitrepo.Signature) (string, error) {
	c, err := r.Repo.Commit(ctx, base, files, msg, author)
	r.cancel(ErrCancelled)
	return c, err
}

// A release cancelled before its push pushes nothing and records one
// cancelled row, in a real SQLite history (whose writes a cancelled
// context would refuse); the status page's cached plan still plans from
// the remote's revision, not from the commit the cancel left behind.
func TestCancelBeforePushIsRecordedAndLeavesNoLocalCommit(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	before := gitCLI(t, g.bare, "rev-parse", "main")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	g.e.repo = cancelsDuringCommit{g.repo, cancel}
	_, err := g.e.Execute(ctx, "team", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{JobID: "j1"})
	if err == nil {
		t.Fatal("a release cancelled before its push succeeded")
	}
	if head := gitCLI(t, g.bare, "rev-parse", "main"); head != before {
		t.Fatalf("the remote moved to %.12s; a cancel before the push must push nothing", head)
	}
	evs := g.events(t)
	if len(evs) != 1 || evs[0].Type != history.Cancelled {
		t.Errorf("history = %+v; want one cancelled row", evs)
	}
	g.e.repo = g.repo
	p, err := g.e.Plan(context.Background(), Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", Cached: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].Action != Update || p.Items[0].Updates[0].Current != "reg/web:1.0" {
		t.Errorf("cached plan after the cancel = %+v; want web 1.0 -> 1.2, as the remote has it", rows(p))
	}
}

// A release cancelled while it waits for the sync (or a rollback) to
// finish applying records its cancel too.
func TestCancelWhileWaitingIsRecorded(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	hold, release := make(chan struct{}), make(chan struct{})
	go g.e.Exclusive(context.Background(), func() error { close(hold); <-release; return nil })
	<-hold
	defer close(release)
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(ErrCancelled) })
	_, err := g.e.Execute(ctx, "team", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{JobID: "j1"})
	if err == nil {
		t.Fatal("want the cancel's error")
	}
	evs := g.events(t)
	if len(evs) != 1 || evs[0].Type != history.Cancelled || evs[0].User != "dana" || len(evs[0].Services) != 1 {
		t.Errorf("history = %+v; want one cancelled row naming dana and web", evs)
	}
}

// An automated batch that moves a HelmRelease nothing reports on and a
// Deployment that rolls out ends "applied, not rolled out". Its history
// has a row per service: the HelmRelease's says it was not rolled out,
// the Deployment's does not. The per-service rows were rebuilt from the
// plan and all lost the note, so history claimed a rollout nobody saw
// (found by the torture suite, seed 119).
func TestAutomatedBatchRowsSayNotRolledOut(t *testing.T) {
	hr := strings.Replace(helmWeb, "  namespace: default\n", "  namespace: default\n  annotations:\n    fluxd.io/automated: \"true\"\n", 1)
	g := newRealGit(t, map[string]string{"web.yaml": hr, "api.yaml": deployment("api", "reg/api:2.0", "fluxd.io/automated", "true")})
	g.cluster.workloads = []platform.Workload{
		{ID: hrWeb, Generation: 1, ObservedGeneration: 0, Status: "updating"},
		{ID: id("api"), Generation: 1, ObservedGeneration: 1, Status: "ready"},
	}
	spec := Spec{Services: []platform.ID{hrWeb, id("api")}, AllLatest: true, User: "automator", Automated: true}
	res, err := g.e.Execute(context.Background(), "team", spec, history.AutomatedRelease, ExecOptions{RolloutTimeout: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.NotRolledOut, "not rolled out") {
		t.Fatalf("NotRolledOut = %q, want the HelmRelease named", res.NotRolledOut)
	}
	got := map[string]bool{}
	for _, ev := range g.events(t) {
		got[strings.Join(ev.Services, ",")] = strings.Contains(ev.Message, "not rolled out")
	}
	want := map[string]bool{hrWeb.String(): true, id("api").String(): false}
	if len(got) != len(want) || got[hrWeb.String()] != true || got[id("api").String()] != false {
		t.Errorf("rows saying 'not rolled out', by service: %v; want %v", got, want)
	}
}
