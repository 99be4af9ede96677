package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/pgserver"
)

// TestPromotionRecordOnceWhenTheAnswerIsLost: the connection drops just
// as a compare-and-swap write of a record is sent (the server runs and
// commits it; the client never hears back). The write is tried again on
// a new connection, which finds the record moved on by this very write,
// and reports it done at its new version, not as a conflict with itself.
// Both the first write (version 0) and a later one are cut.
func TestPromotionRecordOnceWhenTheAnswerIsLost(t *testing.T) {
	u, srv := pgserver.Database(t)
	ctx := context.Background()
	p := newProxy(t, srv.Port)
	s, err := Open(ctx, Config{URL: p.url(t, u), Password: srv.Password, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := history.PromotionRecord{Pipeline: "team/web", Stage: "prod", Bundle: "b1"}
	for version := range int64(2) {
		marker := fmt.Sprintf(`{"write":%d}`, version)
		cut := make(chan struct{})
		p.set(func(chunk []byte) bool {
			// 'B': the Bind carrying the write's values, sent with its
			// Execute and Sync once the statement is prepared.
			if chunk[0] == 'B' && bytes.Contains(chunk, []byte(marker)) {
				close(cut)
				return true
			}
			return false
		})
		r.Version, r.Data = version, []byte(marker)
		got, err := s.PutPromotionRecord(ctx, r)
		select {
		case <-cut:
		default:
			t.Fatalf("write %d: the proxy never saw it: the test did not test anything", version)
		}
		if err != nil {
			t.Fatalf("write %d across a lost answer: %v; want it done", version, err)
		}
		if got.Version != version+1 {
			t.Errorf("write %d returned version %d; want %d", version, got.Version, version+1)
		}
		recs, err := s.PromotionRecords(ctx, "team/web")
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Version != version+1 || string(recs[0].Data) != marker {
			t.Errorf("after write %d: %+v; want it stored once, at version %d", version, recs, version+1)
		}
	}
}

// TestPromotionByteOrderUnderALanguageCollation: on a database whose
// default collation is a language's, promotion's bundles (same time),
// records, pauses and pipelines still come back in byte order, as SQLite
// returns them and the contract says.
func TestPromotionByteOrderUnderALanguageCollation(t *testing.T) {
	ctx := context.Background()
	s := openCollated(t)
	defer s.Close()
	keys := []string{"b", "B", "_a"}
	want := []string{"B", "_a", "b"}
	for _, k := range keys {
		err := errors.Join(
			s.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: "p", ID: k, Data: []byte(`{}`)}),
			s.SetPromotionPause(ctx, history.PromotionPause{Pipeline: "p", Stage: k}),
			s.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: k, ID: "x", Data: []byte(`{}`)}),
		)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: "p", Stage: "s", Bundle: k, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: "p", Stage: k, Bundle: "x", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	bundles, err := s.PromotionBundles(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.PromotionRecords(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	pauses, err := s.PromotionPauses(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	pipelines, err := s.PromotionPipelines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gotBundles, gotStages, gotRecBundles, gotPauses []string
	for _, b := range bundles {
		gotBundles = append(gotBundles, b.ID)
	}
	for _, r := range recs {
		if r.Stage == "s" {
			gotRecBundles = append(gotRecBundles, r.Bundle)
		} else {
			gotStages = append(gotStages, r.Stage)
		}
	}
	for _, pz := range pauses {
		gotPauses = append(gotPauses, pz.Stage)
	}
	for what, got := range map[string][]string{
		"bundles of one time, by ID": gotBundles,
		"records' stages":            gotStages,
		"one stage's records":        gotRecBundles,
		"pauses":                     gotPauses,
	} {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	if diff := cmp.Diff([]string{"B", "_a", "b", "p"}, pipelines); diff != "" {
		t.Errorf("pipelines (-want +got):\n%s", diff)
	}
}
