package promotion

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// The controller is tested here against doubles of its ports: an
// in-memory store with the real compare-and-swap rule, a "cluster"
// whose services run what the last succeeded job wrote, and a releaser
// that checks each promotion spec. The wiring on the real stack is
// e2e's (TestPromotion*).

type memStore struct {
	mu      sync.Mutex
	bundles []Bundle
	recs    map[string]Record
	pauses  map[string]map[string]Pause
}

func newMemStore() *memStore {
	return &memStore{recs: map[string]Record{}, pauses: map[string]map[string]Pause{}}
}

func (m *memStore) SaveBundle(_ context.Context, b Bundle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.bundles {
		if o.Pipeline == b.Pipeline && o.ID == b.ID {
			return nil
		}
	}
	m.bundles = append(m.bundles, b)
	return nil
}

func (m *memStore) Bundles(_ context.Context, p string) ([]Bundle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Bundle
	for _, b := range m.bundles {
		if b.Pipeline == p {
			out = append(out, b)
		}
	}
	return out, nil
}

func (m *memStore) Records(_ context.Context, p string) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.recs {
		if r.Pipeline == p {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Stage+a.Bundle, b.Stage+b.Bundle) })
	return out, nil
}

func (m *memStore) PutRecord(_ context.Context, r Record) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := r.Pipeline + "/" + r.Stage + "/" + r.Bundle
	if m.recs[k].Version != r.Version {
		return r, fmt.Errorf("%s at %d, not %d: %w", k, m.recs[k].Version, r.Version, ErrConflict)
	}
	r.Version++
	m.recs[k] = r
	return r, nil
}

func (m *memStore) Pauses(_ context.Context, p string) (map[string]Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Pause{}
	for k, v := range m.pauses[p] {
		out[k] = v
	}
	return out, nil
}

func (m *memStore) SetPause(_ context.Context, p, stage string, pz *Pause) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pauses[p] == nil {
		m.pauses[p] = map[string]Pause{}
	}
	if pz == nil {
		delete(m.pauses[p], stage)
	} else {
		m.pauses[p][stage] = *pz
	}
	return nil
}

// world is the cluster and the release engine at once: a promotion job
// "runs" when the test says, and then its services run its images.
type world struct {
	mu      sync.Mutex
	images  map[platform.ID]string // service → image (one container "app")
	ready   map[platform.ID]bool
	locked  map[platform.ID]string
	digests map[string]string // repo:tag → digest
	jobs    map[string]*fakeJob
	seq     int
	failJob string // the next job ends failed with this error
	// present are the services in this "cluster"; nil: every service
	// asked for (one cluster holds every stage).
	present map[platform.ID]bool
}

type fakeJob struct {
	spec  release.Spec
	state history.JobState
	err   string
}

func newWorld() *world {
	return &world{images: map[platform.ID]string{}, ready: map[platform.ID]bool{}, locked: map[platform.ID]string{},
		digests: map[string]string{}, jobs: map[string]*fakeJob{}}
}

func digestOf(s string) string {
	return "sha256:" + strings.Repeat(fmt.Sprintf("%x", len(s)%16), 32) + fmt.Sprintf("%032x", []byte(s)[:min(len(s), 16)])
}

// push makes an image exist in the "registry".
func (w *world) push(ref string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.digests[ref] = digestOf(ref)
}

// release sets a service's image, rolled out.
func (w *world) release(id platform.ID, ref string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.images[id], w.ready[id] = ref, true
}

func (w *world) Running(_ context.Context, ids []platform.ID) ([]Running, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Running
	for _, id := range ids {
		img := w.images[id]
		missing := w.present != nil && !w.present[id]
		out = append(out, Running{Service: id, Missing: missing, Ready: w.ready[id] && img != "", Locked: w.locked[id],
			Containers: []RunningContainer{{Name: "app", Image: img}}})
	}
	return out, nil
}

func (w *world) Digest(_ context.Context, image string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.digests[image]
	if !ok {
		return "", fmt.Errorf("%s: no such tag", image)
	}
	return d, nil
}

func (w *world) Plan(_ context.Context, sp release.Spec) (*release.Plan, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sp.Promotion == nil || len(sp.Services) == 0 {
		return nil, errors.New("not a promotion")
	}
	for _, id := range sp.Services {
		if l := w.locked[id]; l != "" && !sp.Force {
			return nil, fmt.Errorf("%s is %s", id, l)
		}
	}
	plan := &release.Plan{Checksum: fmt.Sprintf("%s/%s", sp.Promotion.Stage, sp.Promotion.Bundle)}
	for _, id := range sp.Services {
		for _, img := range sp.Promotion.Images {
			if w.digests[img.Repository+":"+img.Tag] != img.Digest {
				return nil, fmt.Errorf("tag %s:%s moved", img.Repository, img.Tag)
			}
			to := img.Repository + ":" + img.Tag
			if w.images[id] != to {
				plan.Items = append(plan.Items, release.Item{Service: id, Action: release.Update,
					Updates: []release.ContainerUpdate{{Container: "app", Current: w.images[id], Target: to}}})
			}
		}
	}
	return plan, nil
}

func (w *world) Enqueue(_ context.Context, instance string, sp release.Spec, checksum string) (jobs.JobUpdate, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	id := fmt.Sprintf("job-%d", w.seq)
	w.jobs[id] = &fakeJob{spec: sp, state: history.JobQueued}
	return jobs.JobUpdate{Job: history.Job{ID: id, Instance: instance, State: history.JobQueued}}, nil
}

func (w *world) Get(_ context.Context, instance, id string) (jobs.JobUpdate, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok := w.jobs[id]
	if !ok {
		return jobs.JobUpdate{}, history.ErrNotFound
	}
	return jobs.JobUpdate{Job: history.Job{ID: id, Instance: instance, State: j.state, Error: j.err}}, nil
}

// runJobs ends every queued job: it succeeds (its services run its
// images) unless failJob is set.
func (w *world) runJobs() (ran []release.Spec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.jobs))
	for id := range w.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := w.jobs[id]
		if j.state != history.JobQueued {
			continue
		}
		ran = append(ran, j.spec)
		if w.failJob != "" {
			j.state, j.err, w.failJob = history.JobFailed, w.failJob, ""
			continue
		}
		j.state = history.JobSucceeded
		for _, svc := range j.spec.Services {
			for _, img := range j.spec.Promotion.Images {
				w.images[svc], w.ready[svc] = img.Repository+":"+img.Tag, true
			}
		}
	}
	return ran
}

type checks struct {
	mu   sync.Mutex
	fail map[string]string // check name → why it fails
	runs int
}

func (k *checks) Run(_ context.Context, c Check, st Stage, b Bundle) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.runs++
	if why := k.fail[c.Name]; why != "" {
		return errors.New(why)
	}
	return nil
}

type harness struct {
	t     *testing.T
	store Store
	w     *world
	k     *checks
	c     *Controller
	now   time.Time
	p     Pipeline
	notes []Notice
	mu    sync.Mutex
}

const testPipeline = `apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: web, namespace: team}
spec:
  stages:
  - name: dev
    services: [team-dev:deployment/web]
  - name: staging
    from: dev
    services: [team-staging:deployment/web]
    auto: true
    soak: 5s
    rollbackOnFailure: true
    checks:
    - http: {url: "http://127.0.0.1:8080/healthz"}
  - name: prod
    from: staging
    services: [team-prod:deployment/web]
    approvals: 1
`

func mustID(s string) platform.ID {
	id, err := platform.ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

var (
	devSvc     = mustID("team-dev:deployment/web")
	stagingSvc = mustID("team-staging:deployment/web")
	prodSvc    = mustID("team-prod:deployment/web")
)

func newHarness(t *testing.T, pipeline string) *harness {
	t.Helper()
	return newHarnessOn(t, pipeline, newMemStore())
}

// newHarnessOn is a harness whose fluxd keeps its state in store.
func newHarnessOn(t *testing.T, pipeline string, store Store) *harness {
	t.Helper()
	ps, probs := Parse("pipeline.yaml", []byte(pipeline))
	if len(probs) > 0 || len(ps) != 1 {
		t.Fatalf("parse: %v", probs)
	}
	h := &harness{t: t, store: store, w: newWorld(), k: &checks{fail: map[string]string{}}, p: ps[0],
		now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	h.c = New(Config{Store: h.store, Releaser: h.w, Cluster: h.w, Digests: h.w, Checker: h.k,
		Now:    func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now },
		Notice: func(_ context.Context, n Notice) { h.mu.Lock(); h.notes = append(h.notes, n); h.mu.Unlock() }})
	h.c.SetPipelines(ps, nil)
	return h
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// settle steps until nothing changes: checks run in goroutines, so it
// waits for them between steps.
func (h *harness) settle() {
	h.t.Helper()
	ctx := context.Background()
	for range 20 {
		before := h.snapshot()
		if err := h.c.Step(ctx); err != nil {
			h.t.Logf("step: %v", err)
		}
		h.waitChecks()
		if h.snapshot() == before {
			return
		}
	}
}

func (h *harness) waitChecks() {
	for range 1000 {
		h.c.mu.Lock()
		n := len(h.c.inflight)
		h.c.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatal("checks never ended")
}

func (h *harness) snapshot() string {
	recs, _ := h.store.Records(context.Background(), h.p.ID())
	var s []string
	for _, r := range recs {
		s = append(s, fmt.Sprintf("%s %s %s %v %d", r.Stage, r.Bundle, r.Status, r.Current, r.Version))
	}
	h.w.mu.Lock()
	s = append(s, fmt.Sprint(len(h.w.jobs)))
	h.w.mu.Unlock()
	return strings.Join(s, "\n")
}

// stage returns the stage's current bundle's status and images.
func (h *harness) stage(name string) (Record, bool) {
	recs, _ := h.store.Records(context.Background(), h.p.ID())
	return current(stageRecords(recs, name))
}

func (h *harness) bundleOf(image string) string {
	h.w.mu.Lock()
	d := h.w.digests[image]
	h.w.mu.Unlock()
	repo, tag, _ := strings.Cut(image, ":")
	return bundleID([]Image{{Repository: repo, Tag: tag, Digest: d}})
}

func (h *harness) status(stage, bundle string) Status {
	recs, _ := h.store.Records(context.Background(), h.p.ID())
	r, ok := find(stageRecords(recs, stage), bundle)
	if !ok {
		return ""
	}
	return r.Status
}

// releaseDev is a release into the first stage: its services run img.
func (h *harness) releaseDev(img string) string {
	h.w.push("registry.test/web:" + img)
	h.w.release(devSvc, "registry.test/web:"+img)
	h.settle()
	return h.bundleOf("registry.test/web:" + img)
}

func TestDevToStagingToProd(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	if s := h.status("dev", b1); s != Verified {
		t.Fatalf("dev's bundle is %q, want verified (dev has no gates)", s)
	}
	cur, ok := h.stage("staging")
	if !ok || cur.Bundle != b1 || cur.Status != Promoted || cur.Job == "" || cur.PromotedBy != Automatic {
		t.Fatalf("staging = %+v, want bundle %s promoted by fluxd with a job", cur, b1)
	}
	ran := h.w.runJobs()
	if len(ran) != 1 || ran[0].Promotion.Bundle != b1 || ran[0].Services[0] != stagingSvc || ran[0].User != Automatic {
		t.Fatalf("jobs run: %+v", ran)
	}
	h.settle()
	if s := h.status("staging", b1); s != Soaking {
		t.Fatalf("staging after its check passed: %q, want soaking", s)
	}
	if _, ok := h.stage("prod"); ok {
		t.Fatal("prod got a bundle before staging verified one")
	}
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("staging", b1); s != Verified {
		t.Fatalf("staging after the soak: %q, want verified", s)
	}
	if s := h.status("prod", b1); s != AwaitingApproval {
		t.Fatalf("prod: %q, want awaiting approval", s)
	}
	h.w.mu.Lock()
	njobs := len(h.w.jobs)
	h.w.mu.Unlock()
	if njobs != 1 {
		t.Fatalf("%d jobs before prod's approval, want 1", njobs)
	}
	r, err := h.c.Approve(context.Background(), "web", "prod", "", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Approvers, []string{"alice"}) {
		t.Fatalf("approvers %v", r.Approvers)
	}
	h.settle()
	h.w.runJobs()
	h.settle()
	if cur, _ := h.stage("prod"); cur.Bundle != b1 || cur.Status != Verified {
		t.Fatalf("prod = %+v, want %s verified", cur, b1)
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if h.w.images[prodSvc] != "registry.test/web:1.0.0" {
		t.Fatalf("prod runs %s", h.w.images[prodSvc])
	}
}

func TestApprovingTwiceCountsOnce(t *testing.T) {
	h := newHarness(t, strings.Replace(testPipeline, "approvals: 1", "approvals: 2", 1))
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(10 * time.Second)
	h.settle()
	for range 2 {
		if _, err := h.c.Approve(context.Background(), "team/web", "prod", b1[:6], "alice"); err != nil {
			t.Fatal(err)
		}
	}
	h.settle()
	if s := h.status("prod", b1); s != AwaitingApproval {
		t.Fatalf("prod after alice approved twice: %q, want still awaiting approval", s)
	}
	if _, err := h.c.Approve(context.Background(), "team/web", "prod", b1, "bob"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if s := h.status("prod", b1); s != Promoted {
		t.Fatalf("prod after bob approved: %q, want promoted", s)
	}
}

func TestFailingCheckRollsBackToLastVerified(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("staging", b1); s != Verified {
		t.Fatalf("staging: %q", s)
	}
	h.k.fail["http-0"] = "GET http://127.0.0.1:8080/healthz: 503 Service Unavailable"
	b2 := h.releaseDev("2.0.0")
	h.w.runJobs() // the promotion of b2
	h.settle()
	if s := h.status("staging", b2); s != Failed {
		t.Fatalf("staging's b2: %q, want failed", s)
	}
	cur, _ := h.stage("staging")
	if cur.Bundle != b1 || cur.Job == "" {
		t.Fatalf("staging current = %+v, want a rollback job onto %s", cur, b1)
	}
	ran := h.w.runJobs()
	if len(ran) != 1 || ran[0].Promotion.Bundle != b1 {
		t.Fatalf("rollback jobs: %+v", ran)
	}
	h.settle()
	if cur, _ := h.stage("staging"); cur.Bundle != b1 || cur.Status != Verified || cur.Job != "" {
		t.Fatalf("staging after the rollback = %+v", cur)
	}
	if h.w.images[stagingSvc] != "registry.test/web:1.0.0" {
		t.Fatalf("staging runs %s", h.w.images[stagingSvc])
	}
	// b2 is never promoted on from staging, nor again into it.
	h.settle()
	if s := h.status("prod", b2); s != "" {
		t.Fatalf("prod has failed bundle b2: %q", s)
	}
	if n := len(h.w.runJobs()); n != 0 {
		t.Fatalf("%d more jobs after the rollback", n)
	}
}

func TestNewBuildDoesNotResetSoak(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	if s := h.status("staging", b1); s != Soaking {
		t.Fatalf("b1 in staging: %q", s)
	}
	h.advance(3 * time.Second)
	b2 := h.releaseDev("2.0.0") // promoted over b1 mid-soak
	h.w.runJobs()
	h.settle()
	if s := h.status("staging", b1); s != Soaking {
		t.Fatalf("b1 after b2 arrived: %q, want still soaking", s)
	}
	h.advance(2 * time.Second)
	h.settle()
	if s := h.status("staging", b1); s != Verified {
		t.Fatalf("b1 after its own 5s: %q, want verified (its soak was not reset)", s)
	}
	if s := h.status("staging", b2); s != Soaking {
		t.Fatalf("b2 after 2s: %q, want soaking", s)
	}
	h.advance(3 * time.Second)
	h.settle()
	if s := h.status("prod", b2); s != AwaitingApproval {
		t.Fatalf("prod's b2: %q, want awaiting approval (the newest verified)", s)
	}
}

func TestManualPromotionOfOlderBundlePauses(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	b2 := h.releaseDev("2.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(10 * time.Second)
	h.settle()
	if cur, _ := h.stage("staging"); cur.Bundle != b2 {
		t.Fatalf("staging runs %s, want b2", cur.Bundle)
	}
	ctx := context.Background()
	req := PromoteRequest{Pipeline: "web", Stage: "staging", Bundle: b1, User: "carol"}
	_, plan, err := h.c.PlanPromotion(ctx, req)
	if err != nil || plan.Updates() != 1 {
		t.Fatalf("plan: %v %+v", err, plan)
	}
	if _, err := h.c.Promote(ctx, "default", req, plan.Checksum); err != nil {
		t.Fatal(err)
	}
	pz, _ := h.store.Pauses(ctx, h.p.ID())
	if pz["staging"].By != "carol" {
		t.Fatalf("pauses %+v, want staging paused by carol", pz)
	}
	h.w.runJobs()
	h.settle()
	b3 := h.releaseDev("3.0.0")
	h.settle()
	if cur, _ := h.stage("staging"); cur.Bundle != b1 {
		t.Fatalf("staging moved to %s while paused, want %s", cur.Bundle, b1)
	}
	st, _ := h.c.Stages(ctx, "web")
	if st[1].Paused == nil || !strings.Contains(st[1].Hold, "paused by carol") {
		t.Fatalf("staging's status does not show the pause: %+v", st[1])
	}
	if err := h.c.Resume(ctx, "web", "staging", "carol"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if cur, _ := h.stage("staging"); cur.Bundle != b3 {
		t.Fatalf("staging after resume = %s, want b3 %s", cur.Bundle, b3)
	}
}

func TestLockedServiceHoldsPromotion(t *testing.T) {
	h := newHarness(t, testPipeline)
	h.w.mu.Lock()
	h.w.locked[stagingSvc] = "locked by dave: incident 42"
	h.w.mu.Unlock()
	h.w.release(stagingSvc, "registry.test/web:0.9.0")
	h.w.push("registry.test/web:0.9.0")
	h.releaseDev("1.0.0")
	if n := len(h.w.runJobs()); n != 0 {
		t.Fatalf("%d promotion jobs into a stage with a locked service", n)
	}
	st, _ := h.c.Stages(context.Background(), "web")
	if !strings.Contains(st[1].Hold, "incident 42") {
		t.Fatalf("staging's hold %q does not say why", st[1].Hold)
	}
}

func TestFailedJobFailsTheBundle(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.failJob = "rollout of team-staging:deployment/web timed out: 0 of 1 pods ready"
	h.w.runJobs()
	h.settle()
	r, _ := h.stage("staging")
	if h.status("staging", b1) != Failed || !strings.Contains(r.Reason, "timed out") {
		t.Fatalf("staging: %+v", r)
	}
}

// TestRandomControllerRuns drives the controller with seeded random
// events (releases into dev, jobs that succeed or fail, checks that
// pass or fail, time, approvals, promotions by hand, resumes) and
// checks its invariants after every step:
//   - each stage has at most one current bundle;
//   - a bundle fluxd promoted by itself into a stage is verified in the
//     stage's from-stage, or (a rollback) was verified in the stage;
//   - every job moves exactly a stored bundle's images, to the stage's
//     services.
//
// It fails when the runs drew no automatic promotion, rollback or
// approval at all: a run that reaches nothing checks nothing.
func TestRandomControllerRuns(t *testing.T) {
	drew := map[string]int{}
	defer func() {
		t.Logf("drew %v", drew)
		for _, what := range []string{"promoted", "rolled back", "approved", "paused", "failed", "verified"} {
			if drew[what] == 0 && !t.Failed() {
				t.Errorf("the random runs drew no %q notice", what)
			}
		}
	}()
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := newRand(seed)
			h := newHarness(t, testPipeline)
			ctx := context.Background()
			version := 0
			for step := 0; step < 60; step++ {
				switch r.Intn(9) {
				case 0, 1:
					version++
					h.releaseDev(fmt.Sprintf("1.%d.0", version))
				case 2:
					if r.Intn(4) == 0 {
						h.w.failJob = "rollout failed"
					}
					h.w.runJobs()
				case 3:
					if r.Intn(3) == 0 {
						h.k.fail["http-0"] = "503"
					} else {
						delete(h.k.fail, "http-0")
					}
				case 4, 5:
					h.advance(time.Duration(r.Intn(4)) * time.Second)
				case 6:
					_, _ = h.c.Approve(ctx, "web", "prod", "", []string{"alice", "bob"}[r.Intn(2)])
				case 7:
					bs, _ := h.store.Bundles(ctx, h.p.ID())
					if len(bs) > 0 {
						b := bs[r.Intn(len(bs))]
						stage := []string{"staging", "prod"}[r.Intn(2)]
						req := PromoteRequest{Pipeline: "web", Stage: stage, Bundle: b.ID, User: "carol"}
						if _, plan, err := h.c.PlanPromotion(ctx, req); err == nil {
							_, _ = h.c.Promote(ctx, "default", req, plan.Checksum)
						}
					}
				case 8:
					_ = h.c.Resume(ctx, "web", []string{"staging", "prod"}[r.Intn(2)], "carol")
				}
				h.settle()
				checkInvariants(t, h, step)
			}
			for _, n := range h.notes {
				drew[n.What]++
			}
		})
	}
}

func checkInvariants(t *testing.T, h *harness, step int) {
	t.Helper()
	ctx := context.Background()
	recs, _ := h.store.Records(ctx, h.p.ID())
	bs, _ := h.store.Bundles(ctx, h.p.ID())
	byID := map[string]Bundle{}
	for _, b := range bs {
		byID[b.ID] = b
	}
	for _, st := range h.p.Stages {
		here := stageRecords(recs, st.Name)
		n := 0
		for _, r := range here {
			if r.Current {
				n++
			}
			if r.PromotedBy != Automatic || st.From == "" {
				continue
			}
			from, ok := find(stageRecords(recs, st.From), r.Bundle)
			if !(ok && from.Status == Verified) && !(r.Status == Verified) {
				t.Fatalf("step %d: fluxd promoted %s into %s (now %s), but it is not verified in %s (%+v)", step, r.Bundle, st.Name, r.Status, st.From, from)
			}
		}
		if n > 1 {
			t.Fatalf("step %d: stage %s has %d current bundles", step, st.Name, n)
		}
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	for id, j := range h.w.jobs {
		b, ok := byID[j.spec.Promotion.Bundle]
		if !ok {
			t.Fatalf("step %d: job %s moves bundle %s, which is not stored", step, id, j.spec.Promotion.Bundle)
		}
		for i, img := range b.Images {
			p := j.spec.Promotion.Images[i]
			if p.Repository != img.Repository || p.Tag != img.Tag || p.Digest != img.Digest {
				t.Fatalf("step %d: job %s moves %+v, bundle %s holds %+v", step, id, p, b.ID, img)
			}
		}
		st, _ := h.p.Stage(j.spec.Promotion.Stage)
		if !slices.Equal(j.spec.Services, st.Services) {
			t.Fatalf("step %d: job %s releases %v into %s, whose services are %v", step, id, j.spec.Services, st.Name, st.Services)
		}
	}
}

// A newer bundle verified in staging supersedes an older one still
// awaiting prod's approval: only one waits, and it is the one that can be
// promoted.
func TestNewerBundleSupersedesAnOlderAwaitingApproval(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("prod", b1); s != AwaitingApproval {
		t.Fatalf("prod's b1: %q", s)
	}
	b2 := h.releaseDev("2.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s1, s2 := h.status("prod", b1), h.status("prod", b2); s1 != Superseded || s2 != AwaitingApproval {
		t.Fatalf("prod's b1 %q, b2 %q; want superseded and awaiting approval", s1, s2)
	}
	st, _ := h.c.Stages(context.Background(), "web")
	if len(st[2].Waiting) != 1 || st[2].Waiting[0].Bundle != b2 {
		t.Fatalf("prod waits for %+v, want only %s", st[2].Waiting, b2)
	}
	if _, err := h.c.Approve(context.Background(), "web", "prod", "", "alice"); err != nil {
		t.Fatalf("approve with one bundle waiting: %v", err)
	}
}

// A release by hand into a stage that takes bundles by promotion (a
// rollback with fluxctl rollback, say) pauses automatic promotion there,
// so that fluxd does not overwrite it (Argo CD Image Updater's users'
// complaint); the first stage takes releases and never pauses.
func TestReleaseByHandIntoAStagePausesIt(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if s := h.status("staging", b1); s != Verified {
		t.Fatalf("staging's b1: %q", s)
	}
	h.w.push("registry.test/web:0.9.0")
	h.w.release(stagingSvc, "registry.test/web:0.9.0") // fluxctl rollback
	h.settle()
	pz, _ := h.store.Pauses(context.Background(), h.p.ID())
	if _, ok := pz["staging"]; !ok {
		t.Fatalf("staging not paused after a release by hand: %+v", pz)
	}
	if _, ok := pz["dev"]; ok {
		t.Fatal("dev paused")
	}
	h.releaseDev("2.0.0")
	h.settle()
	if n := len(h.w.runJobs()); n != 0 {
		t.Fatalf("%d promotion jobs into paused staging", n)
	}
	if h.w.images[stagingSvc] != "registry.test/web:0.9.0" {
		t.Fatalf("staging runs %s; the rollback was overwritten", h.w.images[stagingSvc])
	}
}

// Concurrent promotions of one bundle into one stage (the loop's step
// and a person's fluxctl promote, both on the leader) queue one job.
func TestConcurrentPromotionsQueueOneJob(t *testing.T) {
	h := newHarness(t, strings.Replace(testPipeline, "auto: true", "auto: false", 1))
	b1 := h.releaseDev("1.0.0")
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.c.Promote(ctx, "default", PromoteRequest{Pipeline: "web", Stage: "staging", Bundle: b1, User: "carol"}, "")
		}()
	}
	wg.Wait()
	h.w.mu.Lock()
	n := len(h.w.jobs)
	h.w.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d jobs queued by 8 concurrent promotions of one bundle, want 1", n)
	}
}

// Resuming a stage moved back by hand to an older bundle takes it forward
// again to the newest bundle verified there before, without asking for the
// approvals it had.
func TestResumeGoesForwardAgain(t *testing.T) {
	h := newHarness(t, testPipeline)
	ctx := context.Background()
	b0 := h.releaseDev("1.0.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if _, err := h.c.Approve(ctx, "web", "prod", "", "alice"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.w.runJobs()
	h.settle()
	b1 := h.releaseDev("1.1.0")
	h.w.runJobs()
	h.settle()
	h.advance(5 * time.Second)
	h.settle()
	if _, err := h.c.Approve(ctx, "web", "prod", "", "alice"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.w.runJobs()
	h.settle()
	if cur, _ := h.stage("prod"); cur.Bundle != b1 || cur.Status != Verified {
		t.Fatalf("prod = %+v, want %s verified", cur, b1)
	}
	req := PromoteRequest{Pipeline: "web", Stage: "prod", Bundle: b0, User: "carol"}
	if _, err := h.c.Promote(ctx, "default", req, ""); err != nil {
		t.Fatal(err)
	}
	h.w.runJobs()
	h.settle()
	if cur, _ := h.stage("prod"); cur.Bundle != b0 {
		t.Fatalf("prod = %s after the promotion by hand, want %s", cur.Bundle, b0)
	}
	if err := h.c.Resume(ctx, "web", "prod", "carol"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.w.runJobs()
	h.settle()
	if cur, _ := h.stage("prod"); cur.Bundle != b1 || cur.Status != Verified {
		t.Fatalf("prod after resume = %+v, want back on %s", cur, b1)
	}
}

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

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

// Two clusters, one store: cluster A runs dev, cluster B runs staging
// and prod, each with its own fluxd (its own Controller, cluster,
// release engine and queue), sharing the store. A fluxd steps only the
// stages whose services are in its cluster, and reads every stage's
// records for its decisions.

type twoClusters struct {
	t    *testing.T
	a, b *harness
}

// newTwoClusters makes A's fluxd on stores[0] and B's on stores[1] (one
// database: the same store, or two connections to it).
func newTwoClusters(t *testing.T, stores [2]Store) *twoClusters {
	t.Helper()
	mk := func(store Store, present ...platform.ID) *harness {
		h := newHarnessOn(t, testPipeline, store)
		h.w.present = map[platform.ID]bool{}
		for _, id := range present {
			h.w.present[id] = true
		}
		return h
	}
	return &twoClusters{t: t, a: mk(stores[0], devSvc), b: mk(stores[1], stagingSvc, prodSvc)}
}

// push makes an image exist in the registry both clusters pull from.
func (tc *twoClusters) push(ref string) {
	tc.a.w.push(ref)
	tc.b.w.push(ref)
}

func (tc *twoClusters) advance(d time.Duration) {
	tc.a.advance(d)
	tc.b.advance(d)
}

// settle steps both fluxds, B first, until nothing changes.
func (tc *twoClusters) settle() {
	tc.t.Helper()
	ctx := context.Background()
	for range 20 {
		before := tc.a.snapshot() + "|" + tc.b.snapshot()
		for _, h := range []*harness{tc.b, tc.a} {
			if err := h.c.Step(ctx); err != nil {
				tc.t.Logf("step: %v", err)
			}
			h.waitChecks()
		}
		if tc.a.snapshot()+"|"+tc.b.snapshot() == before {
			return
		}
	}
}

func (w *world) jobCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

func (h *harness) count(what, stage string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, no := range h.notes {
		if no.What == what && no.Stage == stage {
			n++
		}
	}
	return n
}

// crossCluster is the story of item 6: dev on A verifies, B promotes
// staging and prod; A never enqueues for B's stages, B never for A's.
func crossCluster(t *testing.T, stores [2]Store) {
	tc := newTwoClusters(t, stores)
	ctx := context.Background()
	img := "registry.test/web:1.0.0"
	tc.push(img)
	tc.a.w.release(devSvc, img)
	tc.settle()
	b1 := tc.a.bundleOf(img)
	if s := tc.a.status("dev", b1); s != Verified {
		t.Fatalf("dev's bundle is %q, want verified", s)
	}
	if n := tc.a.w.jobCount(); n != 0 {
		t.Fatalf("A's fluxd queued %d jobs: it runs only dev, which takes releases, not promotions", n)
	}
	if n := tc.b.w.jobCount(); n != 1 {
		t.Fatalf("B's fluxd queued %d jobs, want 1: the promotion into staging", n)
	}
	cur, _ := tc.b.stage("staging")
	if cur.Bundle != b1 || cur.Status != Promoted || cur.PromotedBy != Automatic {
		t.Fatalf("staging = %+v, want %s promoted by fluxd", cur, b1)
	}
	if ran := tc.b.w.runJobs(); len(ran) != 1 || ran[0].Services[0] != stagingSvc {
		t.Fatalf("B's jobs: %+v", ran)
	}
	tc.settle()
	if tc.a.k.runs != 0 || tc.b.k.runs == 0 {
		t.Fatalf("staging's check ran %d times on A and %d on B; it is B's to run", tc.a.k.runs, tc.b.k.runs)
	}
	tc.advance(5 * time.Second)
	tc.settle()
	if s := tc.a.status("staging", b1); s != Verified {
		t.Fatalf("staging after the soak: %q, want verified", s)
	}
	if s := tc.a.status("prod", b1); s != AwaitingApproval {
		t.Fatalf("prod: %q, want awaiting approval", s)
	}
	// An approval is a record in the store: either fluxd takes it.
	if _, err := tc.a.c.Approve(ctx, "web", "prod", "", "alice"); err != nil {
		t.Fatal(err)
	}
	tc.settle()
	tc.b.w.runJobs()
	tc.settle()
	if cur, _ := tc.a.stage("prod"); cur.Bundle != b1 || cur.Status != Verified {
		t.Fatalf("prod = %+v, want %s verified", cur, b1)
	}
	if n := tc.a.w.jobCount(); n != 0 {
		t.Fatalf("A's fluxd queued %d jobs for B's stages", n)
	}
	for _, st := range []string{"staging", "prod"} {
		if n := tc.a.count("promoted", st) + tc.b.count("promoted", st); n != 1 {
			t.Errorf("%d notices of a promotion into %s, want 1", n, st)
		}
		if n := tc.a.count("awaiting approval", st) + tc.b.count("awaiting approval", st); st == "prod" && n != 1 {
			t.Errorf("%d notices of prod awaiting approval, want 1", n)
		}
	}
	if n := tc.a.count("verified", "dev") + tc.b.count("verified", "dev"); n != 1 || tc.b.count("verified", "dev") != 0 {
		t.Errorf("dev verified: %d notices (B's: %d), want 1, A's", n, tc.b.count("verified", "dev"))
	}

	// Each shows every stage; each says which are another cluster's.
	for _, side := range []struct {
		h      *harness
		name   string
		mine   []string
		theirs []string
	}{{tc.a, "A", []string{"dev"}, []string{"staging", "prod"}}, {tc.b, "B", []string{"staging", "prod"}, []string{"dev"}}} {
		sts, err := side.h.c.Stages(ctx, "web")
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]StageStatus{}
		for _, s := range sts {
			by[s.Stage] = s
		}
		for _, st := range []string{"dev", "staging", "prod"} {
			if by[st].Current == nil || by[st].Current.Bundle != b1 {
				t.Errorf("%s's fluxd shows %s at %+v, want %s", side.name, st, by[st].Current, b1)
			}
		}
		for _, st := range side.mine {
			if by[st].Away != "" {
				t.Errorf("%s's fluxd says its own stage %s is away: %s", side.name, st, by[st].Away)
			}
		}
		for _, st := range side.theirs {
			if !strings.Contains(by[st].Hold, "not in this fluxd's cluster") {
				t.Errorf("%s's fluxd shows %s's hold as %q, want it said to be another cluster's", side.name, st, by[st].Hold)
			}
		}
	}

	// A promotion by hand into B's stage, asked of A, is refused.
	_, _, err := tc.a.c.PlanPromotion(ctx, PromoteRequest{Pipeline: "web", Stage: "staging", User: "carol"})
	if err == nil || !strings.Contains(err.Error(), "does not promote into staging") {
		t.Fatalf("promoting into staging through A's fluxd: %v, want a refusal naming the stage's cluster", err)
	}
}

func TestCrossClusterPromotion(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		s := newMemStore()
		crossCluster(t, [2]Store{s, s})
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "history.db")
		var stores [2]Store
		for i := range stores {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			stores[i] = NewStore(db)
		}
		crossCluster(t, stores)
	})
	t.Run("postgres", func(t *testing.T) {
		url, srv := pgserver.Database(t)
		var stores [2]Store
		for i := range stores {
			db, err := postgres.Open(context.Background(), postgres.Config{URL: url, Password: srv.Password})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			stores[i] = NewStore(db)
		}
		crossCluster(t, stores)
	})
}

// Both fluxds step at once, many times, while dev moves: compare-and-swap
// keeps each promotion single, and no stage gets a job from A.
func TestCrossClusterConcurrentSteps(t *testing.T) {
	s := newMemStore()
	tc := newTwoClusters(t, [2]Store{s, s})
	ctx := context.Background()
	for v := 1; v <= 5; v++ {
		img := fmt.Sprintf("registry.test/web:1.%d.0", v)
		tc.push(img)
		tc.a.w.release(devSvc, img)
		var wg sync.WaitGroup
		// One loop per cluster, as each cluster's leader runs one.
		for _, h := range []*harness{tc.a, tc.b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					_ = h.c.Step(ctx)
				}
			}()
		}
		wg.Wait()
		tc.settle() // B's steps may all have run before A saw dev's bundle
		tc.b.w.runJobs()
		tc.settle()
		tc.advance(5 * time.Second)
		tc.settle()
		if n := tc.a.w.jobCount(); n != 0 {
			t.Fatalf("v%d: A's fluxd queued %d jobs", v, n)
		}
		if n := tc.b.w.jobCount(); n != v {
			t.Fatalf("v%d: B's fluxd queued %d jobs, want %d: one per bundle into staging", v, n, v)
		}
		b := tc.a.bundleOf(img)
		if s := tc.a.status("staging", b); s != Verified {
			t.Fatalf("v%d: staging holds %s as %q, want verified", v, b, s)
		}
		if n := tc.b.count("promoted", "staging") + tc.a.count("promoted", "staging"); n != v {
			t.Fatalf("v%d: %d promotions into staging, want %d", v, n, v)
		}
	}
}

// A stage split between clusters is stepped by neither fluxd, and each
// says why.
func TestSplitStageIsRefused(t *testing.T) {
	const pipeline = `apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: web, namespace: team}
spec:
  stages:
  - name: dev
    services: [team-dev:deployment/web]
  - name: staging
    from: dev
    services: [team-staging:deployment/web, team-staging:deployment/api]
    auto: true
`
	s := newMemStore()
	tc := &twoClusters{t: t}
	api := mustID("team-staging:deployment/api")
	for i, present := range [][]platform.ID{{devSvc, stagingSvc}, {api}} {
		h := newHarnessOn(t, pipeline, s)
		h.w.present = map[platform.ID]bool{}
		for _, id := range present {
			h.w.present[id] = true
		}
		if i == 0 {
			tc.a = h
		} else {
			tc.b = h
		}
	}
	img := "registry.test/web:1.0.0"
	tc.push(img)
	tc.a.w.release(devSvc, img)
	tc.settle()
	if s := tc.a.status("dev", tc.a.bundleOf(img)); s != Verified {
		t.Fatalf("dev: %q, want verified", s)
	}
	if na, nb := tc.a.w.jobCount(), tc.b.w.jobCount(); na+nb != 0 {
		t.Fatalf("jobs queued into a split stage: A %d, B %d", na, nb)
	}
	for _, h := range []*harness{tc.a, tc.b} {
		sts, err := h.c.Stages(context.Background(), "web")
		if err != nil {
			t.Fatal(err)
		}
		if hold := sts[1].Hold; !strings.Contains(hold, "split between clusters") || !strings.Contains(hold, "team-staging:deployment/api") {
			t.Errorf("staging's hold: %q, want it refused as split, naming the services", hold)
		}
	}
}
