package promotion

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/platform"
)

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
