package promotion

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Review findings (review4): failing tests for the lead to pick.

// crashingStore fails one PutRecord of a promoted record with its job:
// fluxd killed between queuing a promotion's job and recording it.
type crashingStore struct {
	*memStore
	mu    sync.Mutex
	armed bool
	dead  bool // killed: the old fluxd does nothing more
}

var errDead = errors.New("this fluxd was killed (simulated)")

func (s *crashingStore) isDead() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.dead }

func (s *crashingStore) Records(ctx context.Context, p string) ([]Record, error) {
	if s.isDead() {
		return nil, errDead
	}
	return s.memStore.Records(ctx, p)
}

func (s *crashingStore) Bundles(ctx context.Context, p string) ([]Bundle, error) {
	if s.isDead() {
		return nil, errDead
	}
	return s.memStore.Bundles(ctx, p)
}

func (s *crashingStore) PutRecord(ctx context.Context, r Record) (Record, error) {
	s.mu.Lock()
	crash := s.armed && r.Stage == "staging" && r.Status == Promoted && r.Job != ""
	if crash {
		s.armed, s.dead = false, true
	}
	dead := s.dead
	s.mu.Unlock()
	if crash || dead {
		return r, errors.New("SIGKILL (simulated): the record was never written")
	}
	return s.memStore.PutRecord(ctx, r)
}

// A fluxd killed after queuing an automatic promotion's job and before
// recording it: the job is recovered and run (by the next leader), and
// the next leader's loop then finds the stage running a bundle it has no
// record of. It takes it for a release by hand and pauses automatic
// promotion, attributed to "release", though fluxd promoted it.
func TestCrashAfterEnqueueDoesNotPauseTheStage(t *testing.T) {
	store := &crashingStore{memStore: newMemStore()}
	h := newHarnessOn(t, testPipeline, store)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("staging", b1); s != Verified {
		t.Fatalf("staging's b1: %q", s)
	}
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	b2 := h.releaseDev("2.0.0") // staging's promotion of b2: job queued, record lost
	if n := len(h.w.runJobs()); n == 0 {
		t.Fatal("no job was queued for b2")
	}
	// The next leader (same store, same world) steps.
	store.mu.Lock()
	store.dead = false
	store.mu.Unlock()
	h.c = New(Config{Store: store, Releaser: h.w, Cluster: h.w, Digests: h.w, Checker: h.k,
		Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }})
	h.c.SetPipelines([]Pipeline{h.p}, nil)
	h.settle()
	pz, _ := store.Pauses(context.Background(), h.p.ID())
	if p, ok := pz["staging"]; ok {
		t.Errorf("staging paused after fluxd's own promotion of %s was recovered: %+v", b2, p)
	}
	recs, _ := store.Records(context.Background(), h.p.ID())
	if r, ok := find(stageRecords(recs, "staging"), b2); ok && r.PromotedBy != Automatic {
		t.Errorf("staging's %s is recorded as promoted by %q, want %q", b2, r.PromotedBy, Automatic)
	}
}

// A person of another instance (tenant) promoting the bundle fluxd is
// already moving into a stage is handed the automatic job, kept under
// instance "default": fluxctl then follows a job ID its instance cannot
// read (GetJob/WatchJob are per instance), and learns of another
// instance's job.
func TestPromoteUnderWayAnswersOnlyTheCallersInstance(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0") // staging: b1 promoted automatically, job queued
	cur, ok := h.stage("staging")
	if !ok || cur.Job == "" {
		t.Fatalf("staging = %+v, want a job in flight", cur)
	}
	u, err := h.c.Promote(context.Background(), "team-b", PromoteRequest{Pipeline: "web", Stage: "staging", Bundle: b1, User: "bob"}, "")
	if err != nil {
		if !strings.Contains(err.Error(), cur.Job) {
			t.Logf("refused: %v", err)
		}
		return
	}
	if u.Job.Instance != "team-b" {
		t.Fatalf("team-b's promote answered job %s of instance %q", u.Job.ID, u.Job.Instance)
	}
}

// A promotion the loop decides but cannot plan (here the tag moved since
// the bundle was verified; likewise an image that does not pass
// signature verification, which promote has no --allow-unverified to
// lift) fails at every step: Run logs a warning every interval and
// re-plans (a registry HEAD per image each time), while 'fluxctl stages'
// shows the stage approved and nothing holding it.
func TestAPromotionThatCannotBePlannedSaysWhyInStages(t *testing.T) {
	h := newHarness(t, testPipeline)
	ctx := context.Background()
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("prod", b1); s != AwaitingApproval {
		t.Fatalf("prod's b1: %q", s)
	}
	h.w.mu.Lock()
	h.w.digests["registry.test/web:1.0.0"] = digestOf("pushed again") // the tag moved
	h.w.mu.Unlock()
	if _, err := h.c.Approve(ctx, "web", "prod", b1, "alice"); err != nil {
		t.Fatal(err)
	}
	h.settle() // the first step fails; the next ones hold, not re-plan
	h.w.mu.Lock()
	jobsBefore := len(h.w.jobs)
	h.w.mu.Unlock()
	if err := h.c.Step(ctx); err != nil {
		t.Fatalf("a step within a minute of the failure planned again: %v", err)
	}
	h.w.mu.Lock()
	if len(h.w.jobs) != jobsBefore {
		t.Fatalf("a job was queued for a moved tag")
	}
	h.w.mu.Unlock()
	sts, err := h.c.Stages(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Stage == "prod" && !strings.Contains(st.Hold, "moved") {
			t.Errorf("prod: bundle %s approved, its promotion refused at every step, and stages says nothing holds it (current %v)", b1, st.Current)
		}
	}
}

// conflictOnce answers one PutRecord of a promoted record with its job
// with ErrConflict: another writer (an approval through the webhook on
// another replica, a check's result) changed the record between the
// loop's read and its write.
type conflictOnce struct {
	*memStore
	mu   sync.Mutex
	done bool
}

func (s *conflictOnce) PutRecord(ctx context.Context, r Record) (Record, error) {
	s.mu.Lock()
	hit := !s.done && r.Status == Promoted && r.Job != ""
	if hit {
		s.done = true
	}
	s.mu.Unlock()
	if hit {
		return r, ErrConflict
	}
	return s.memStore.PutRecord(ctx, r)
}

// A conflict on the record after the promotion's job was queued leaves
// the job queued and unrecorded; the next step decides the same
// promotion and queues a second job for it (the first has not pushed
// yet). On the real engine the second job's confirmed plan no longer
// matches once the first has pushed, it fails, and the loop, following
// that job, fails the bundle in the stage though it rolled out.
func TestConflictAfterEnqueueQueuesOneJob(t *testing.T) {
	store := &conflictOnce{memStore: newMemStore()}
	h := newHarnessOn(t, testPipeline, store)
	h.releaseDev("1.0.0") // staging: promoted, job queued, record write conflicts once; the loop steps on
	h.w.mu.Lock()
	n := len(h.w.jobs)
	h.w.mu.Unlock()
	if n != 1 {
		t.Errorf("%d jobs queued for one promotion of one bundle into staging, want 1", n)
	}
}
