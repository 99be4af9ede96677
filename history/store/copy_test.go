package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// TestCopySQLiteToPostgres fills a SQLite file as a fluxd would, copies
// it into an empty PostgreSQL database, and reads everything back there;
// a second copy is refused.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	src, err := Open(ctx, Config{URL: "sqlite://" + filepath.Join(t.TempDir(), "history.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1203 { // more than one export page
		inst := []string{"team-a", "team-b"}[i%2]
		if _, err := src.Record(ctx, history.Event{Instance: inst, Type: history.Release, Services: []string{fmt.Sprintf("ns:deployment/s%d", i%7)}, Message: fmt.Sprint(i),
			Changes: []history.Change{{Service: "ns:deployment/x", Container: "c", From: "a", To: "b"}}, StartedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		st := history.JobSucceeded
		if i == 29 {
			st = history.JobQueued
		}
		if _, err := src.SaveJob(ctx, history.Job{ID: fmt.Sprintf("job%02d", i), Instance: "team-a", State: st, Spec: []byte(`{"x":1}`), Checksum: "c", CreatedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, text := range []string{"fetching the git remote", "done"} {
		if err := src.AppendJobLog(ctx, history.JobLogLine{JobID: "job00", Instance: "team-a", Seq: int64(i + 1), Time: t0, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.SaveTags(ctx, "reg/app", map[string]registry.TagState{"1.0": {Digest: "sha256:a"}, "latest": {Digest: "sha256:b", Stable: 2, NextCheck: t0}, "bare": {Digest: "sha256:c"}},
		map[string]registry.ImageMeta{"sha256:a": {CreatedAt: t0, Platform: "linux/amd64", Labels: map[string]string{"k": "v"}}, "sha256:b": {}}, nil); err != nil {
		t.Fatal(err)
	}
	list := registry.TagList{Tags: []string{"1.0", "bare", "latest"}, Stable: 3, Next: t0.Add(time.Minute), ReadAt: t0}
	if err := src.SaveTagList(ctx, "reg/app", list); err != nil {
		t.Fatal(err)
	}
	// Promotion's rows: two pipelines, a record written twice, a pause.
	for i, p := range []string{"team/web", "team/api"} {
		if err := src.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: p, ID: fmt.Sprint("b", i), Created: t0, Data: []byte(`{"images":[]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := src.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: "team/web", Stage: "dev", Bundle: "b0", Updated: t0, Data: []byte(`{"status":"verifying"}`)})
	if err == nil {
		r.Data = []byte(`{"status":"verified"}`)
		_, err = src.PutPromotionRecord(ctx, r)
	}
	if err == nil {
		err = src.SetPromotionPause(ctx, history.PromotionPause{Pipeline: "team/web", Stage: "prod", By: "alice", Reason: "promoted b0 by hand", Since: t0})
	}
	if err != nil {
		t.Fatal(err)
	}
	// Verification results: one final, one to be checked again.
	for _, r := range []history.VerificationResult{
		{Repository: "reg/app", Digest: "sha256:a", Profile: "ci@0123", Outcome: "verified", Final: true, Signer: "sha256:k (ci.pub)", CheckedAt: t0},
		{Repository: "reg/app", Digest: "sha256:b", Profile: "ci@0123", Outcome: "unsigned", Detail: "no cosign signature", CheckedAt: t0.Add(time.Minute)},
	} {
		if err := src.SaveVerificationResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	url, srv := pgDatabase(t)
	dst, err := Open(ctx, Config{URL: url, PasswordFile: srv.PasswordFile()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	n, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Events: 1203, Jobs: 30, JobLogLines: 2, Repositories: 1, Tags: 3, Bundles: 2, PromotionRecords: 1, Pauses: 1, VerificationResults: 2}); n != want {
		t.Errorf("copied %+v; want %+v", n, want)
	}
	if lines, err := dst.JobLog(ctx, "team-a", "job00", 0); err != nil || len(lines) != 2 || lines[1].Text != "done" {
		t.Errorf("the copied job's log: %+v, %v", lines, err)
	}
	eq := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	for _, q := range []struct {
		inst string
		q    history.Query
	}{{"team-a", history.Query{Limit: 2000}}, {"team-b", history.Query{Service: "ns:deployment/s3", Limit: 2000}}} {
		want, err := src.Events(ctx, q.inst, q.q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.Events(ctx, q.inst, q.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatal("nothing to compare")
		}
		if diff := cmp.Diff(want, got, eq); diff != "" {
			t.Errorf("%s events %+v after the copy (-sqlite +postgres):\n%s", q.inst, q.q, diff)
		}
	}
	wantJobs, _ := src.Jobs(ctx, "team-a", 100)
	gotJobs, err := dst.Jobs(ctx, "team-a", 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantJobs, gotJobs, eq); diff != "" {
		t.Errorf("jobs after the copy (-sqlite +postgres):\n%s", diff)
	}
	if live, _ := dst.LiveJobs(ctx); len(live) != 1 || live[0].ID != "job29" {
		t.Errorf("live jobs after the copy = %v; want job29, which a PostgreSQL fluxd then carries on", live)
	}
	wantTags, _ := src.CachedTags(ctx, "reg/app")
	gotTags, err := dst.CachedTags(ctx, "reg/app")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantTags, gotTags, eq); diff != "" {
		t.Errorf("registry cache after the copy (-sqlite +postgres):\n%s", diff)
	}
	if got, ok, err := dst.TagList(ctx, "reg/app"); err != nil || !ok {
		t.Errorf("the tag list was not copied: %v %v", ok, err)
	} else if diff := cmp.Diff(list, got, eq); diff != "" {
		t.Errorf("tag list after the copy (-sqlite +postgres):\n%s", diff)
	}
	for _, p := range []string{"team/web", "team/api"} {
		wantB, _ := src.PromotionBundles(ctx, p)
		gotB, err := dst.PromotionBundles(ctx, p)
		if err != nil || len(wantB) != 1 {
			t.Fatal(wantB, err)
		}
		if diff := cmp.Diff(wantB, gotB, eq); diff != "" {
			t.Errorf("%s bundles after the copy (-sqlite +postgres):\n%s", p, diff)
		}
	}
	// The record's content is copied; its version starts again at 1.
	wantR, _ := src.PromotionRecords(ctx, "team/web")
	gotR, err := dst.PromotionRecords(ctx, "team/web")
	if err != nil || len(wantR) != 1 || wantR[0].Version != 2 {
		t.Fatal(wantR, err)
	}
	wantR[0].Version = 1
	if diff := cmp.Diff(wantR, gotR, eq); diff != "" {
		t.Errorf("promotion records after the copy (-sqlite +postgres):\n%s", diff)
	}
	wantP, _ := src.PromotionPauses(ctx, "team/web")
	gotP, err := dst.PromotionPauses(ctx, "team/web")
	if err != nil || len(wantP) != 1 {
		t.Fatal(wantP, err)
	}
	if diff := cmp.Diff(wantP, gotP, eq); diff != "" {
		t.Errorf("pauses after the copy (-sqlite +postgres):\n%s", diff)
	}

	var wantV, gotV []history.VerificationResult
	if err := src.EachVerificationResult(ctx, func(r history.VerificationResult) error { wantV = append(wantV, r); return nil }); err != nil || len(wantV) != 2 {
		t.Fatal(wantV, err)
	}
	if err := dst.EachVerificationResult(ctx, func(r history.VerificationResult) error { gotV = append(gotV, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantV, gotV, eq); diff != "" {
		t.Errorf("verification results after the copy (-sqlite +postgres):\n%s", diff)
	}

	if _, err := Copy(ctx, src, dst); !errors.Is(err, ErrTargetNotEmpty) {
		t.Errorf("second copy into the same database: %v; want ErrTargetNotEmpty", err)
	}
	if got, _ := dst.Events(ctx, "team-a", history.Query{Limit: 2000}); len(got) != 602 {
		t.Errorf("after the refused copy team-a has %d events; want 602 (nothing doubled)", len(got))
	}
}

// TestCopyRefusesATargetWithPromotionState: a target holding only
// promotion's rows (a pause) is not empty: copying into it would mix two
// pipelines' states.
func TestCopyRefusesATargetWithPromotionState(t *testing.T) {
	ctx := context.Background()
	open := func() Store {
		s, err := Open(ctx, Config{URL: "sqlite://" + filepath.Join(t.TempDir(), "history.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	src, dst := open(), open()
	if _, err := src.Record(ctx, history.Event{Instance: "i", Type: history.Release}); err != nil {
		t.Fatal(err)
	}
	if err := dst.SetPromotionPause(ctx, history.PromotionPause{Pipeline: "team/web", Stage: "prod", By: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, err := Copy(ctx, src, dst)
	if !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("copying into a store holding a pause: %v; want ErrTargetNotEmpty", err)
	}
	if evs, _ := dst.Events(ctx, "i", history.Query{}); len(evs) != 0 {
		t.Errorf("the refused copy wrote %d events", len(evs))
	}
}
