package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fluxd/fluxd/history"
)

// equalRows compares promotion rows: times by instant, Data as text (nil
// and empty alike), empty lists as nil.
var equalRows = cmp.Options{equalTimes, cmpopts.EquateEmpty()}

// testPromotionBundles: bundles are read back after a reopen, oldest
// first (ties by ID, byte order), per pipeline; saving a bundle again
// keeps the first one stored.
func testPromotionBundles(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC)
	bundle := func(pipeline, id string, created time.Time, data string) history.PromotionBundle {
		return history.PromotionBundle{Pipeline: pipeline, ID: id, Created: created, Data: []byte(data)}
	}
	saved := []history.PromotionBundle{
		bundle("team/web", "bbb", t0.Add(time.Minute), `{"n":1}`),
		bundle("team/web", "aaa", t0.Add(2*time.Minute), `{"n":2}`),
		bundle("team/web", "Zzz", t0.Add(time.Minute), `{"n":3}`), // same time as bbb: "Z" sorts before "b"
		bundle("team/api", "aaa", t0, `{"other":"pipeline"}`),
	}
	for _, b := range saved {
		if err := s.SavePromotionBundle(ctx, b); err != nil {
			t.Fatalf("SavePromotionBundle(%s %s): %v", b.Pipeline, b.ID, err)
		}
	}
	// Immutable: a second save of aaa, with other content, changes nothing.
	if err := s.SavePromotionBundle(ctx, bundle("team/web", "aaa", t0.Add(time.Hour), `{"n":"changed"}`)); err != nil {
		t.Fatalf("saving a bundle again: %v", err)
	}
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.PromotionBundles(ctx, "team/web")
	if err != nil {
		t.Fatal(err)
	}
	want := []history.PromotionBundle{saved[2], saved[0], saved[1]}
	if diff := cmp.Diff(want, got, equalRows); diff != "" {
		t.Errorf("team/web's bundles, oldest first, the first save of each kept (-want +got):\n%s", diff)
	}
	got, err = s.PromotionBundles(ctx, "team/api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(saved[3:], got, equalRows); diff != "" {
		t.Errorf("team/api's bundles (-want +got):\n%s", diff)
	}
	if got, err := s.PromotionBundles(ctx, "none"); err != nil || len(got) != 0 {
		t.Errorf("bundles of a pipeline never stored: %v, %v; want none", got, err)
	}
	if err := s.SavePromotionBundle(ctx, bundle("", "x", t0, "{}")); err == nil {
		t.Error("a bundle without a pipeline was saved")
	}
}

// testPromotionRecordsCAS: a record is written by compare-and-swap on its
// version: 0 creates it (once), the stored version moves it on, and any
// other version is a conflict that writes nothing. Records are read back
// after a reopen, by stage then bundle (byte order), per pipeline.
func testPromotionRecordsCAS(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 987654321, time.UTC)
	rec := func(stage, bundle string, version int64, data string) history.PromotionRecord {
		return history.PromotionRecord{Pipeline: "team/web", Stage: stage, Bundle: bundle, Version: version, Updated: t0, Data: []byte(data)}
	}
	put := func(r history.PromotionRecord) history.PromotionRecord {
		t.Helper()
		got, err := s.PutPromotionRecord(ctx, r)
		if err != nil {
			t.Fatalf("PutPromotionRecord(%s %s at %d): %v", r.Stage, r.Bundle, r.Version, err)
		}
		if got.Version != r.Version+1 {
			t.Errorf("PutPromotionRecord(%s %s at %d) returned version %d; want %d", r.Stage, r.Bundle, r.Version, got.Version, r.Version+1)
		}
		return got
	}
	conflict := func(r history.PromotionRecord, why string) {
		t.Helper()
		if _, err := s.PutPromotionRecord(ctx, r); !errors.Is(err, history.ErrConflict) {
			t.Errorf("%s: PutPromotionRecord(%s %s at %d) = %v; want ErrConflict", why, r.Stage, r.Bundle, r.Version, err)
		}
	}
	v1 := put(rec("staging", "b1", 0, `{"status":"promoted"}`))
	conflict(rec("staging", "b1", 0, `{"status":"other"}`), "creating a record that exists")
	v2 := put(rec("staging", "b1", 1, `{"status":"verifying"}`))
	conflict(rec("staging", "b1", 1, `{"status":"stale"}`), "writing from a version moved on")
	conflict(rec("staging", "b1", 7, `{"status":"ahead"}`), "writing from a version never stored")
	conflict(rec("staging", "missing", 1, `{}`), "updating a record never created")
	put(rec("dev", "b1", 0, `{"status":"verified"}`))
	put(rec("Prod", "b0", 0, `{"status":"verified"}`)) // "P" sorts before "d"
	put(rec("staging", "a0", 0, `{"status":"failed"}`))
	other := put(history.PromotionRecord{Pipeline: "team/api", Stage: "staging", Bundle: "b1", Data: []byte(`{}`)})
	if _, err := s.PutPromotionRecord(ctx, rec("staging", "b1", -1, `{}`)); err == nil || errors.Is(err, history.ErrConflict) {
		t.Errorf("a negative version: %v; want an error that is not a conflict", err)
	}
	if _, err := s.PutPromotionRecord(ctx, rec("", "b1", 0, `{}`)); err == nil {
		t.Error("a record without a stage was written")
	}

	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.PromotionRecords(ctx, "team/web")
	if err != nil {
		t.Fatal(err)
	}
	want := []history.PromotionRecord{
		rec("Prod", "b0", 1, `{"status":"verified"}`),
		rec("dev", "b1", 1, `{"status":"verified"}`),
		rec("staging", "a0", 1, `{"status":"failed"}`),
		v2,
	}
	if v1.Version != 1 || string(v2.Data) != `{"status":"verifying"}` {
		t.Errorf("writes returned %+v then %+v", v1, v2)
	}
	if diff := cmp.Diff(want, got, equalRows); diff != "" {
		t.Errorf("team/web's records after the writes and conflicts (-want +got):\n%s", diff)
	}
	got, err = s.PromotionRecords(ctx, "team/api")
	if err != nil || len(got) != 1 || got[0].Version != 1 {
		t.Fatalf("team/api's records: %+v, %v; want its one record", got, err)
	}
	// Written without an Updated time: the store's time of the write.
	if got[0].Updated.IsZero() || time.Since(got[0].Updated) > time.Hour || !got[0].Updated.Equal(other.Updated) {
		t.Errorf("a record written without Updated reads back Updated %v (returned %v); want the time of the write", got[0].Updated, other.Updated)
	}
}

// testPromotionRecordsRace: writers racing to write one record from the
// same version (replicas, or the fluxds of two clusters): exactly one
// wins each round, the others get ErrConflict, and the record holds the
// winner's write.
func testPromotionRecordsRace(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	const writers, rounds = 4, 15
	for round := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			errs    []error
		)
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				data := fmt.Sprintf(`{"writer":%d,"round":%d}`, w, round)
				_, err := s.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: "p", Stage: "prod", Bundle: "b", Version: int64(round), Data: []byte(data)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, data)
				case !errors.Is(err, history.ErrConflict):
					errs = append(errs, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: errors other than conflicts: %v", round, errs)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d writers won from version %d (%v); want exactly one", round, len(winners), round, winners)
		}
		got, err := s.PromotionRecords(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Version != int64(round+1) || string(got[0].Data) != winners[0] {
			t.Fatalf("round %d: stored %+v; want the winner's %s at version %d", round, got, winners[0], round+1)
		}
	}
}

// testPromotionPauses: a pause is read back after a reopen, replaced by
// a second pause of its stage, ended by a delete (twice is harmless), and
// kept per pipeline; its text is cleaned as events' is.
func testPromotionPauses(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 555, time.UTC)
	pause := func(pipeline, stage, by, reason string, since time.Time) history.PromotionPause {
		return history.PromotionPause{Pipeline: pipeline, Stage: stage, By: by, Reason: reason, Since: since}
	}
	for _, p := range []history.PromotionPause{
		pause("team/web", "staging", "alice", "promoted b1 by hand", t0),
		pause("team/web", "prod", "bob", "first", t0),
		pause("team/web", "prod", "carol", "rolled back\x00 by hand\xff", t0.Add(time.Minute)), // replaces bob's
		pause("team/web", "Canary", "dave", "sorts first", t0),
		pause("team/api", "prod", "erin", "other pipeline", t0),
	} {
		if err := s.SetPromotionPause(ctx, p); err != nil {
			t.Fatalf("SetPromotionPause(%s %s): %v", p.Pipeline, p.Stage, err)
		}
	}
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.PromotionPauses(ctx, "team/web")
	if err != nil {
		t.Fatal(err)
	}
	want := []history.PromotionPause{
		pause("team/web", "Canary", "dave", "sorts first", t0),
		pause("team/web", "prod", "carol", "rolled back\uFFFD by hand\uFFFD", t0.Add(time.Minute)),
		pause("team/web", "staging", "alice", "promoted b1 by hand", t0),
	}
	if diff := cmp.Diff(want, got, equalRows); diff != "" {
		t.Errorf("team/web's pauses (-want +got):\n%s", diff)
	}
	for range 2 {
		if err := s.DeletePromotionPause(ctx, "team/web", "prod"); err != nil {
			t.Fatalf("DeletePromotionPause: %v", err)
		}
	}
	got, err = s.PromotionPauses(ctx, "team/web")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]history.PromotionPause{want[0], want[2]}, got, equalRows); diff != "" {
		t.Errorf("team/web's pauses after prod resumed (-want +got):\n%s", diff)
	}
	if got, err := s.PromotionPauses(ctx, "team/api"); err != nil || len(got) != 1 || got[0].By != "erin" {
		t.Errorf("team/api's pauses: %+v, %v; want erin's, untouched", got, err)
	}
	if err := s.SetPromotionPause(ctx, pause("team/web", "", "x", "y", t0)); err == nil {
		t.Error("a pause without a stage was stored")
	}
}

// testPromotionPipelines: the export lists every pipeline with a bundle,
// a record or a pause, once, in byte order.
func testPromotionPipelines(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	if got, err := s.PromotionPipelines(ctx); err != nil || len(got) != 0 {
		t.Fatalf("pipelines of an empty store: %v, %v", got, err)
	}
	steps := []error{
		s.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: "b/bundles", ID: "x", Data: []byte(`{}`)}),
		s.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: "a/all", ID: "x", Data: []byte(`{}`)}),
		s.SetPromotionPause(ctx, history.PromotionPause{Pipeline: "a/all", Stage: "s"}),
		s.SetPromotionPause(ctx, history.PromotionPause{Pipeline: "P/pauses", Stage: "s"}),
	}
	_, err := s.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: "r/records", Stage: "s", Bundle: "x", Data: []byte(`{}`)})
	steps = append(steps, err)
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	got, err := s.PromotionPipelines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"P/pauses", "a/all", "b/bundles", "r/records"}, got); diff != "" {
		t.Errorf("pipelines (-want +got):\n%s", diff)
	}
}
