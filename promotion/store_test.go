package promotion_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/promotion"
)

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

var sameTimes = cmp.Options{cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmpopts.EquateEmpty()}

// backend opens history stores on one database: each call is another
// replica (or another cluster's fluxd) sharing it.
type backend struct {
	name string
	open func(t *testing.T) func(t *testing.T) history.Promotions
}

var backends = []backend{
	{"sqlite", func(t *testing.T) func(t *testing.T) history.Promotions {
		path := filepath.Join(t.TempDir(), "history.db")
		return func(t *testing.T) history.Promotions {
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
	{"postgres", func(t *testing.T) func(t *testing.T) history.Promotions {
		url, srv := pgserver.Database(t)
		return func(t *testing.T) history.Promotions {
			s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Password: srv.Password})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
}

func eachBackend(t *testing.T, test func(t *testing.T, open func(t *testing.T) promotion.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			test(t, func(t *testing.T) promotion.Store { return promotion.NewStore(db(t)) })
		})
	}
}

func digest(c string) string { return "sha256:" + strings.Repeat(c, 64) }

// TestStoreRoundTrip: a bundle and a record written through one fluxd's
// store are read back whole by another's (a replica, a restart, another
// cluster's fluxd), the bundle as it was first saved.
func TestStoreRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) promotion.Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		t0 := time.Date(2026, 12, 3, 9, 0, 0, 123456789, time.UTC)
		bundle, err := promotion.NewBundle("team/web", "dev", []promotion.Image{
			{Repository: "reg.example/team/web", Tag: "1.2.0", Digest: digest("a")},
			{Repository: "reg.example/team/sidecar", Tag: "0.9", Digest: digest("b")},
		}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SaveBundle(ctx, bundle); err != nil {
			t.Fatal(err)
		}
		// The same bundle formed again later (another replica, another
		// cluster): the first stays.
		again := bundle
		again.Created, again.Stage = t0.Add(time.Hour), "staging"
		if err := b.SaveBundle(ctx, again); err != nil {
			t.Fatal(err)
		}
		older, err := promotion.NewBundle("team/web", "dev", []promotion.Image{{Repository: "reg.example/team/web", Tag: "1.1.0", Digest: digest("c")}}, t0.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SaveBundle(ctx, older); err != nil {
			t.Fatal(err)
		}
		got, err := b.Bundles(ctx, "team/web")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]promotion.Bundle{older, bundle}, got, sameTimes); diff != "" {
			t.Errorf("bundles read by another fluxd, oldest first, the first save kept (-want +got):\n%s", diff)
		}

		rec := promotion.Record{Pipeline: "team/web", Stage: "staging", Bundle: bundle.ID, Created: bundle.Created,
			Status: promotion.Soaking, Since: t0.Add(3 * time.Minute), RolledOut: t0.Add(2 * time.Minute), SoakUntil: t0.Add(8 * time.Minute),
			Passed: []string{"http-0", "job-1"}, PromotedBy: "fluxd", Current: true,
			Reason: "a reason", Approvers: []string{"alice"}, Job: "job-1", JobInstance: "team"}
		// Every field is set, so that one the store forgets to keep
		// fails the round trip (Job once did: a promotion's job was
		// never followed to its end on a real store).
		rv := reflect.ValueOf(rec)
		for i := range rv.NumField() {
			if name := rv.Type().Field(i).Name; name != "Version" && rv.Field(i).IsZero() {
				t.Fatalf("the round trip's record leaves %s unset: set it, so the test covers it", name)
			}
		}
		stored, err := a.PutRecord(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Version != 1 {
			t.Errorf("a new record is stored at version %d; want 1", stored.Version)
		}
		prod := promotion.Record{Pipeline: "team/web", Stage: "prod", Bundle: older.ID, Created: older.Created,
			Status: promotion.AwaitingApproval, Since: t0, Approvers: []string{"alice"}}
		if prod, err = b.PutRecord(ctx, prod); err != nil {
			t.Fatal(err)
		}
		failed := promotion.Record{Pipeline: "team/web", Stage: "dev", Bundle: older.ID, Status: promotion.Failed, Reason: "check http-0: 503", Since: t0}
		if failed, err = a.PutRecord(ctx, failed); err != nil {
			t.Fatal(err)
		}
		recs, err := b.Records(ctx, "team/web")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]promotion.Record{failed, prod, stored}, recs, sameTimes); diff != "" {
			t.Errorf("records read by another fluxd (-want +got):\n%s", diff)
		}
	})
}

// TestStoreConflict: a record written from a version another fluxd
// moved on is refused with ErrConflict and changes nothing; read again,
// it is written.
func TestStoreConflict(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) promotion.Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
		r, err := a.PutRecord(ctx, promotion.Record{Pipeline: "web", Stage: "prod", Bundle: "b1", Status: promotion.AwaitingApproval, Since: t0})
		if err != nil {
			t.Fatal(err)
		}
		// Both read version 1; b approves first.
		byB := r
		byB.Approvers = []string{"bob"}
		if _, err := b.PutRecord(ctx, byB); err != nil {
			t.Fatal(err)
		}
		byA := r
		byA.Approvers = []string{"alice"}
		_, err = a.PutRecord(ctx, byA)
		if !errors.Is(err, promotion.ErrConflict) {
			t.Fatalf("writing from a version another fluxd moved on: %v; want ErrConflict", err)
		}
		if !strings.Contains(err.Error(), "stage prod") || !strings.Contains(err.Error(), "b1") {
			t.Errorf("the conflict does not say which record: %v", err)
		}
		recs, err := a.Records(ctx, "web")
		if err != nil || len(recs) != 1 {
			t.Fatalf("records: %+v, %v", recs, err)
		}
		if diff := cmp.Diff([]string{"bob"}, recs[0].Approvers); diff != "" {
			t.Errorf("after the conflict, approvers (-want +got):\n%s", diff)
		}
		// Read again and decided again: both approvals count.
		again := recs[0]
		again.Approvers = []string{"alice", "bob"}
		if again, err = a.PutRecord(ctx, again); err != nil || again.Version != 3 {
			t.Fatalf("writing the record read again: version %d, %v; want version 3", again.Version, err)
		}
	})
}

// TestStoreRace: the fluxds of two clusters race to promote the same
// bundle into a stage from the same record; exactly one does.
func TestStoreRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) promotion.Store) {
		ctx := context.Background()
		stores := []promotion.Store{open(t), open(t)}
		t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
		base, err := stores[0].PutRecord(ctx, promotion.Record{Pipeline: "web", Stage: "prod", Bundle: "b1", Status: promotion.AwaitingApproval, Approvers: []string{"alice"}, Since: t0})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 10 {
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				won  []string
				errs []error
			)
			start := make(chan struct{})
			for i, s := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := base
					r.Status, r.PromotedBy, r.Current = promotion.Promoted, []string{"cluster-a", "cluster-b"}[i], true
					<-start
					_, err := s.PutRecord(ctx, r)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						won = append(won, r.PromotedBy)
					} else if !errors.Is(err, promotion.ErrConflict) {
						errs = append(errs, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 || len(won) != 1 {
				t.Fatalf("round %d: %v won, errors %v; want exactly one winner and conflicts", round, won, errs)
			}
			recs, err := stores[1].Records(ctx, "web")
			if err != nil || len(recs) != 1 || recs[0].PromotedBy != won[0] {
				t.Fatalf("round %d: stored %+v, %v; want %s's write", round, recs, err, won[0])
			}
			base = recs[0]
		}
	})
}

// TestStorePauses: a pause set by one fluxd holds the stage for every
// other, with who and why, until it is resumed.
func TestStorePauses(t *testing.T) {
	eachBackend(t, func(t *testing.T, open func(t *testing.T) promotion.Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
		if got, err := b.Pauses(ctx, "web"); err != nil || len(got) != 0 {
			t.Fatalf("pauses before any: %v, %v", got, err)
		}
		pz := promotion.Pause{By: "alice", Reason: "promoted bundle b0 by hand", Since: t0}
		if err := a.SetPause(ctx, "web", "prod", &pz); err != nil {
			t.Fatal(err)
		}
		if err := a.SetPause(ctx, "other", "prod", &promotion.Pause{By: "bob"}); err != nil {
			t.Fatal(err)
		}
		got, err := b.Pauses(ctx, "web")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]promotion.Pause{"prod": pz}, got, sameTimes); diff != "" {
			t.Errorf("pauses read by another fluxd (-want +got):\n%s", diff)
		}
		if err := b.SetPause(ctx, "web", "prod", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := a.Pauses(ctx, "web"); err != nil || len(got) != 0 {
			t.Errorf("pauses after 'stages resume': %v, %v; want none", got, err)
		}
		if got, err := a.Pauses(ctx, "other"); err != nil || len(got) != 1 {
			t.Errorf("another pipeline's pause after resuming web's: %v, %v; want it kept", got, err)
		}
	})
}
