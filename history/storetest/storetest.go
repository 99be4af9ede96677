package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// Store is what the contract tests need of a store: history.Store and
// the Exporter 'fluxd db copy' reads with.
type Store interface {
	history.Store
	history.Exporter
}

// Factory makes stores for the tests.
type Factory struct {
	// New returns a new store on an empty database, and a function that
	// opens that database again (after the test closed the first).
	// Stores are closed by the test.
	New func(t *testing.T) (Store, func() Store)
}

// Run runs the contract against the stores f makes.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		test func(t *testing.T, f Factory)
	}{
		{"EventsKeyedByInstance", testEventsKeyedByInstance},
		{"EventsNewestFirstWithLimit", testEventsNewestFirstWithLimit},
		{"EventOfManyServices", testEventOfManyServices},
		{"EventWithoutInstanceRefused", testEventWithoutInstance},
		{"EventsConcurrentRecords", testConcurrentRecords},
		{"TextWithNULAndInvalidUTF8", testBadText},
		{"JobsSaveAndRead", testJobsSaveAndRead},
		{"JobsKeyedByInstance", testJobsKeyedByInstance},
		{"FinishedJobStaysFinished", testFinishedJobFenced},
		{"LiveJobsOldestFirst", testLiveJobs},
		{"RegistryCache", testRegistryCache},
		{"RegistryLists", testRegistryLists},
		{"EventsFilteredByTypeAndUser", testEventsFilteredByTypeAndUser},
		{"EventsBetween", testEventsBetween},
		{"JobLogKeptAndKeyedByInstance", testJobLog},
		{"Export", testExport},
		{"SyncDetailKept", testSyncDetail},
		{"ReleaseVerificationKept", testReleaseVerification},
		{"Ping", testPing},
		{"OutboxWithRecord", testOutboxWithRecord},
		{"OutboxCursors", testOutboxCursors},
		{"OutboxPendingAndPrune", testOutboxPendingAndPrune},
		{"OutboxConcurrent", testOutboxConcurrent},
		{"LiveEvents", testLiveEvents},
		{"WebSessions", testWebSessions},
		{"PromotionBundles", testPromotionBundles},
		{"PromotionRecordsCAS", testPromotionRecordsCAS},
		{"PromotionRecordsRace", testPromotionRecordsRace},
		{"PromotionPauses", testPromotionPauses},
		{"PromotionPipelines", testPromotionPipelines},
		{"VerificationResults", testVerificationResults},
		{"VerificationResultsRace", testVerificationResultsRace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.test(t, f) })
	}
}

var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func open(t *testing.T, f Factory) (Store, func() Store) {
	t.Helper()
	s, reopen := f.New(t)
	t.Cleanup(func() { s.Close() })
	return s, func() Store {
		s.Close()
		s = reopen()
		return s
	}
}

func record(t *testing.T, s history.Store, ev history.Event) int64 {
	t.Helper()
	id, err := s.Record(context.Background(), ev)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return id
}

func testEventsKeyedByInstance(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	rel := history.Event{
		Instance: "team-a", Type: history.Release, Services: []string{"default:deployment/a", "default:deployment/b"},
		User: "alice", Message: "ship it", Commit: "abc123", Error: "",
		Changes:   []history.Change{{Service: "default:deployment/a", Container: "app", From: "r/a:1", To: "r/a:2"}},
		StartedAt: t0, EndedAt: t0.Add(time.Second),
	}
	rel.ID = record(t, s, rel)
	record(t, s, history.Event{Instance: "team-b", Type: history.Automate, Services: []string{"default:deployment/a"}, StartedAt: t0})
	record(t, s, history.Event{Instance: "team-a", Type: history.Automate, Services: []string{"default:deployment/b"}, StartedAt: t0.Add(time.Minute)})
	// Reopened: the records are in the database, and migrating again is
	// a no-op.
	s = reopen()
	t.Cleanup(func() { s.Close() })

	got, err := s.Events(ctx, "team-a", history.Query{Service: "default:deployment/a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]history.Event{rel}, got, equalTimes); diff != "" {
		t.Errorf("team-a events for a (-want +got):\n%s", diff)
	}
	all, err := s.Events(ctx, "team-a", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Type != history.Automate || all[1].Type != history.Release {
		t.Errorf("team-a events = %+v; want automate then release, newest first", all)
	}
	if len(all) == 2 && (all[0].Changes == nil || len(all[0].Changes) != 0) {
		t.Errorf("an event recorded without changes reads back as %#v; want an empty, non-nil list", all[0].Changes)
	}
	other, err := s.Events(ctx, "team-b", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 1 || other[0].Type != history.Automate || other[0].Instance != "team-b" {
		t.Errorf("team-b sees %+v; want only its own automate event", other)
	}
	none, err := s.Events(ctx, "team-c", history.Query{})
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("team-c events = %v, %v; want an empty, non-nil list", none, err)
	}
	noSvc, err := s.Events(ctx, "team-b", history.Query{Service: "default:deployment/b"})
	if err != nil || len(noSvc) != 0 {
		t.Errorf("team-b events of b = %v, %v; want none (b's event is team-a's)", noSvc, err)
	}
}

func testEventsNewestFirstWithLimit(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	var ids []int64
	for i := range 105 {
		svc := "default:deployment/odd"
		if i%2 == 0 {
			svc = "default:deployment/even"
		}
		ids = append(ids, record(t, s, history.Event{Instance: "i", Type: history.Release, Services: []string{svc, "default:deployment/all"}, Message: fmt.Sprint(i)}))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("event IDs do not grow: %d after %d", ids[i], ids[i-1])
		}
	}
	all, err := s.Events(ctx, "i", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 100 || all[0].Message != "104" || all[99].Message != "5" {
		t.Fatalf("default query: %d events, first %q; want 100, newest (104) first", len(all), first(all))
	}
	even, err := s.Events(ctx, "i", history.Query{Service: "default:deployment/even", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ev := range even {
		msgs = append(msgs, ev.Message)
		if diff := cmp.Diff([]string{"default:deployment/all", "default:deployment/even"}, sorted(ev.Services)); diff != "" {
			t.Errorf("event %s services (-want +got):\n%s", ev.Message, diff)
		}
	}
	if diff := cmp.Diff([]string{"104", "102", "100"}, msgs); diff != "" {
		t.Errorf("newest 3 events of even (-want +got):\n%s", diff)
	}
}

// testEventOfManyServices records one event naming as many services as a
// start-up sync of a big cluster does, one of them twice: each is kept
// once, and the event is found by any of them.
func testEventOfManyServices(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	var svcs []string
	for i := range 2500 {
		svcs = append(svcs, fmt.Sprintf("ns-%d:deployment/app-%d", i%25, i))
	}
	svcs = append(svcs, svcs[7]) // a service named twice
	id := record(t, s, history.Event{Instance: "i", Type: history.Sync, Services: svcs, Message: "big"})
	record(t, s, history.Event{Instance: "other", Type: history.Sync, Services: svcs[:3], Message: "other"})
	all, err := s.Events(ctx, "i", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ID != id {
		t.Fatalf("events of i: %d (first %q); want the one big event", len(all), first(all))
	}
	if diff := cmp.Diff(sorted(svcs[:2500]), sorted(all[0].Services)); diff != "" {
		t.Errorf("the big event's services (-want +got):\n%s", diff)
	}
	for _, svc := range []string{svcs[0], svcs[7], svcs[2499]} {
		got, err := s.Events(ctx, "i", history.Query{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Message != "big" {
			t.Errorf("events of %s: %d (first %q); want the big event", svc, len(got), first(got))
		}
	}
}

func first(evs []history.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[0].Message
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func testEventWithoutInstance(t *testing.T, f Factory) {
	s, _ := open(t, f)
	if _, err := s.Record(context.Background(), history.Event{Type: history.Release}); err == nil {
		t.Error("an event without an instance was recorded")
	}
	if _, err := s.SaveJob(context.Background(), history.Job{ID: "x"}); err == nil {
		t.Error("a job without an instance was saved")
	}
}

// testBadText: an event and a job whose text holds a NUL byte or invalid
// UTF-8 (a message pasted from a terminal, an error quoting a binary) are
// stored, not refused (PostgreSQL refuses such text), and read back the
// same on every store: cleaned, each bad byte a U+FFFD.
func testBadText(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	ev := history.Event{Instance: "i", Type: history.Release, User: "bad\xffuser", Message: "hi\x00there",
		Error: "exit\x00\xfe", Services: []string{"ns:deployment/a\x00"},
		Changes: []history.Change{{Service: "ns:deployment/a", Container: "c\xff", From: "x:1", To: "x:2"}}}
	if _, err := s.Record(ctx, ev); err != nil {
		t.Fatalf("recording an event with a NUL byte and invalid UTF-8: %v", err)
	}
	evs, err := s.Events(ctx, "i", history.Query{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events: %v, %v", evs, err)
	}
	want := history.Event{ID: evs[0].ID, Instance: "i", Type: history.Release, User: "bad\uFFFDuser", Message: "hi\uFFFDthere",
		Error: "exit\uFFFD\uFFFD", Services: []string{"ns:deployment/a\uFFFD"},
		Changes:   []history.Change{{Service: "ns:deployment/a", Container: "c\uFFFD", From: "x:1", To: "x:2"}},
		StartedAt: evs[0].StartedAt, EndedAt: evs[0].EndedAt}
	if diff := cmp.Diff(want, evs[0], equalTimes); diff != "" {
		t.Errorf("event read back (-want +got):\n%s", diff)
	}
	if _, err := s.SaveJob(ctx, history.Job{ID: "j", Instance: "i", State: history.JobFailed, Error: "git: \x00\xff", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("saving a job whose error holds a NUL byte and invalid UTF-8: %v", err)
	}
	j, err := s.Job(ctx, "i", "j")
	if err != nil {
		t.Fatal(err)
	}
	if j.Error != "git: \uFFFD\uFFFD" {
		t.Errorf("job error read back: %q; want %q", j.Error, "git: \uFFFD\uFFFD")
	}
	if err := s.AppendJobLog(ctx, history.JobLogLine{JobID: "j", Instance: "i", Seq: 1, Time: time.Now(), Stage: "pushing", Text: "remote: \x00\xff"}); err != nil {
		t.Fatalf("saving a job log line holding a NUL byte and invalid UTF-8: %v", err)
	}
	lines, err := s.JobLog(ctx, "i", "j", 0)
	if err != nil || len(lines) != 1 || lines[0].Text != "remote: \uFFFD\uFFFD" {
		t.Errorf("job log read back: %+v, %v; want one line %q", lines, err, "remote: \uFFFD\uFFFD")
	}
}

// testConcurrentRecords: replicas and goroutines record at once; every
// event is kept, with its own ID.
func testConcurrentRecords(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Lock, Services: []string{fmt.Sprintf("ns:deployment/w%d", w)}, Message: fmt.Sprint(i)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Record: %v", err)
	}
	all, err := s.Events(ctx, "i", history.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, ev := range all {
		seen[ev.ID] = true
	}
	if len(all) != writers*each || len(seen) != writers*each {
		t.Errorf("%d events with %d distinct IDs; want %d", len(all), len(seen), writers*each)
	}
}

// testFinishedJobFenced: a late write of a running state (a deposed
// leader's) over a finished job is refused with history.ErrJobFinished and
// leaves the job finished; saving the same final state again (a retry) is
// fine.
func testFinishedJobFenced(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	done := history.Job{ID: "j", Instance: "a", State: history.JobSucceeded, Stage: "done", Commit: "abc", CreatedAt: t0, FinishedAt: t0.Add(time.Minute)}
	if _, err := s.SaveJob(ctx, history.Job{ID: "j", Instance: "a", State: history.JobRunning, Stage: "pushing", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveJob(ctx, done); err != nil {
		t.Fatal(err)
	}
	late := history.Job{ID: "j", Instance: "a", State: history.JobRunning, Stage: "applying", CreatedAt: t0}
	if _, err := s.SaveJob(ctx, late); !errors.Is(err, history.ErrJobFinished) {
		t.Errorf("saving running over a succeeded job: %v; want history.ErrJobFinished", err)
	}
	if _, err := s.SaveJob(ctx, history.Job{ID: "j", Instance: "a", State: history.JobFailed, CreatedAt: t0}); !errors.Is(err, history.ErrJobFinished) {
		t.Errorf("saving failed over a succeeded job: %v; want history.ErrJobFinished", err)
	}
	got, err := s.Job(ctx, "a", "j")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != history.JobSucceeded || got.Stage != "done" || got.Commit != "abc" {
		t.Errorf("after late writes the job is %s/%s, commit %q; want succeeded/done, abc", got.State, got.Stage, got.Commit)
	}
	if _, err := s.SaveJob(ctx, done); err != nil {
		t.Errorf("saving the same final state again: %v", err)
	}
}

func testJobsSaveAndRead(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 42, time.UTC)
	j := history.Job{ID: "j1", Instance: "a", State: history.JobQueued, Stage: "queued", Spec: []byte(`{"services":["x"]}`), Checksum: "sum", CreatedAt: t0}
	seq, err := s.SaveJob(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	j2 := history.Job{ID: "j2", Instance: "a", State: history.JobQueued, Stage: "queued", CreatedAt: t0.Add(time.Second)}
	seq2, err := s.SaveJob(ctx, j2)
	if err != nil {
		t.Fatal(err)
	}
	if seq2 <= seq {
		t.Errorf("second job's seq %d is not after the first's %d", seq2, seq)
	}
	// An update keeps the seq, the spec, the creation time and the
	// checksum, whatever the update carries.
	j.State, j.Stage, j.Plan, j.Commit, j.Error = history.JobFailed, "failed", []byte(`{"items":[]}`), "c0ffee", "it broke"
	j.StartedAt, j.FinishedAt = t0.Add(time.Minute), t0.Add(2*time.Minute)
	upd := j
	upd.Spec, upd.Checksum, upd.CreatedAt = nil, "", t0.Add(time.Hour)
	if again, err := s.SaveJob(ctx, upd); err != nil || again != seq {
		t.Fatalf("updating job: seq %d, %v; want %d", again, err, seq)
	}
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.Job(ctx, "a", "j1")
	if err != nil {
		t.Fatal(err)
	}
	j.Seq = seq
	if diff := cmp.Diff(j, got, equalTimes); diff != "" {
		t.Errorf("job after update (-want +got):\n%s", diff)
	}
	got2, err := s.Job(ctx, "a", "j2")
	if err != nil {
		t.Fatal(err)
	}
	if string(got2.Spec) != "{}" || string(got2.Plan) != "{}" || !got2.StartedAt.IsZero() || !got2.FinishedAt.IsZero() {
		t.Errorf("job saved without spec, plan or times reads back as spec %q plan %q started %v finished %v; want {} {} and zero times", got2.Spec, got2.Plan, got2.StartedAt, got2.FinishedAt)
	}
	if _, err := s.Job(ctx, "a", "nope"); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("missing job: %v; want history.ErrNotFound", err)
	}
}

func testJobsKeyedByInstance(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	for i := range 5 {
		inst := "a"
		if i%2 == 1 {
			inst = "b"
		}
		if _, err := s.SaveJob(ctx, history.Job{ID: fmt.Sprintf("j%d", i), Instance: inst, State: history.JobSucceeded, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Job(ctx, "b", "j0"); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("instance b reading a's job: %v; want history.ErrNotFound", err)
	}
	jobs, err := s.Jobs(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"j4", "j2"}, ids(jobs)); diff != "" {
		t.Errorf("a's newest 2 jobs (-want +got):\n%s", diff)
	}
	jobs, err = s.Jobs(ctx, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"j3", "j1"}, ids(jobs)); diff != "" {
		t.Errorf("b's jobs (-want +got):\n%s", diff)
	}
	none, err := s.Jobs(ctx, "c", 0)
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("c's jobs = %v, %v; want an empty, non-nil list", none, err)
	}
}

func ids(jobs []history.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func testLiveJobs(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	states := []history.JobState{history.JobQueued, history.JobSucceeded, history.JobRunning, history.JobFailed, history.JobQueued, history.JobCancelled}
	for i, st := range states {
		if _, err := s.SaveJob(ctx, history.Job{ID: fmt.Sprintf("j%d", i), Instance: fmt.Sprintf("inst%d", i%2), State: st, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// j0 finishes; j4 keeps its place although saved again.
	if _, err := s.SaveJob(ctx, history.Job{ID: "j0", Instance: "inst0", State: history.JobSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveJob(ctx, history.Job{ID: "j4", Instance: "inst0", State: history.JobRunning}); err != nil {
		t.Fatal(err)
	}
	live, err := s.LiveJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"j2", "j4"}, ids(live)); diff != "" {
		t.Errorf("live jobs of every instance, oldest first (-want +got):\n%s", diff)
	}
}

func testRegistryCache(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	next := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	err := s.SaveTags(ctx, "reg.example/app",
		map[string]registry.TagState{
			"1.0.0":  {Digest: "sha256:aaa"},
			"latest": {Digest: "sha256:bbb", Stable: 3, NextCheck: next},
			"old":    {Digest: "sha256:ccc"},
			"nometa": {Digest: "sha256:ddd"},
		},
		map[string]registry.ImageMeta{
			"sha256:aaa": {CreatedAt: created, ConfigDigest: "sha256:cfg", Platform: "linux/amd64", Labels: map[string]string{"org.opencontainers.image.source": "https://git.example/app"}},
			"sha256:bbb": {},
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTags(ctx, "reg.example/app", map[string]registry.TagState{"latest": {Digest: "sha256:aaa", Stable: 0}}, nil, []string{"old", "never-there"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTags(ctx, "reg.example/other", map[string]registry.TagState{"1.0.0": {Digest: "sha256:eee"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.CachedTags(ctx, "reg.example/app")
	if err != nil {
		t.Fatal(err)
	}
	aaa := registry.CachedTag{Digest: "sha256:aaa", CreatedAt: created, HasCreated: true, ConfigDigest: "sha256:cfg", Platform: "linux/amd64",
		Labels: map[string]string{"org.opencontainers.image.source": "https://git.example/app"}}
	want := map[string]registry.CachedTag{
		"1.0.0":  aaa,
		"latest": aaa,
		"nometa": {Digest: "sha256:ddd"},
	}
	if diff := cmp.Diff(want, got, equalTimes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("cached tags (-want +got):\n%s", diff)
	}
	// An image saved without metadata: known, with a zero creation time.
	if err := s.SaveTags(ctx, "reg.example/b", map[string]registry.TagState{"x": {Digest: "sha256:bbb", Stable: 2, NextCheck: next}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	b, err := s.CachedTags(ctx, "reg.example/b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]registry.CachedTag{"x": {Digest: "sha256:bbb", HasCreated: true, Stable: 2, NextCheck: next}}, b, equalTimes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("tag of an image without metadata (-want +got):\n%s", diff)
	}
	none, err := s.CachedTags(ctx, "reg.example/unknown")
	if err != nil || len(none) != 0 {
		t.Errorf("unknown repository: %v, %v; want nothing", none, err)
	}
}

// Tag lists: kept across a reopen; of two, the one whose read began
// last, whatever order they are saved in; one read ahead of the writer's
// clock (beyond history.ListClockSkew) is replaced.
func testRegistryLists(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	now := time.Now().Truncate(time.Microsecond)
	later := registry.TagList{Tags: []string{"1.0.0", "1.0.1", "latest"}, Stable: 2, Next: now.Add(4 * time.Minute), ReadAt: now}
	earlier := registry.TagList{Tags: []string{"1.0.0"}, Stable: 7, Next: now.Add(time.Hour), ReadAt: now.Add(-time.Second)}
	for _, l := range []registry.TagList{later, earlier} {
		if err := s.SaveTagList(ctx, "reg.example/app", l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveTagList(ctx, "reg.example/empty", registry.TagList{ReadAt: now, Next: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, ok, err := s.TagList(ctx, "reg.example/app")
	if err != nil || !ok {
		t.Fatalf("TagList: %v %v", ok, err)
	}
	if diff := cmp.Diff(later, got, equalTimes); diff != "" {
		t.Errorf("the list read last is kept (-want +got):\n%s", diff)
	}
	if empty, ok, err := s.TagList(ctx, "reg.example/empty"); err != nil || !ok || len(empty.Tags) != 0 {
		t.Errorf("an empty list: %v %v %v; want kept, with no tags", empty, ok, err)
	}
	if _, ok, err := s.TagList(ctx, "reg.example/unknown"); err != nil || ok {
		t.Errorf("unknown repository: %v %v; want not found", ok, err)
	}
	// From a clock an hour ahead: replaced by a read of this clock.
	ahead := registry.TagList{Tags: []string{"2.0.0"}, Next: now.Add(2 * time.Hour), ReadAt: now.Add(time.Hour)}
	if err := s.SaveTagList(ctx, "reg.example/app", ahead); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveTagList(ctx, "reg.example/app", later); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.TagList(ctx, "reg.example/app"); !got.ReadAt.Equal(later.ReadAt) {
		t.Errorf("a list read an hour ahead of this clock was kept over this clock's read: %+v", got)
	}
}

func testExport(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	record(t, s, history.Event{Instance: "a", Type: history.Release, Services: []string{"x"}, Message: "1"})
	record(t, s, history.Event{Instance: "b", Type: history.Lock, Services: []string{"y", "z"}, Message: "2"})
	record(t, s, history.Event{Instance: "a", Type: history.Unlock, Message: "3"})
	var msgs []string
	if err := s.EachEvent(ctx, func(ev history.Event) error { msgs = append(msgs, ev.Instance+ev.Message); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "b2", "a3"}, msgs); diff != "" {
		t.Errorf("every event, oldest first (-want +got):\n%s", diff)
	}
	for _, id := range []string{"j1", "j2"} {
		if _, err := s.SaveJob(ctx, history.Job{ID: id, Instance: id, State: history.JobSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	var jobs []string
	if err := s.EachJob(ctx, func(j history.Job) error { jobs = append(jobs, j.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"j1", "j2"}, jobs); diff != "" {
		t.Errorf("every job, oldest first (-want +got):\n%s", diff)
	}
	for _, r := range []string{"r/b", "r/a"} {
		if err := s.SaveTags(ctx, r, map[string]registry.TagState{"t": {Digest: "d"}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := s.CachedRepositories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r/a", "r/b"}, repos); diff != "" {
		t.Errorf("cached repositories (-want +got):\n%s", diff)
	}
}

func testPing(t *testing.T, f Factory) {
	s, _ := open(t, f)
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// History filters by type and by user (a part of the name, any case),
// together with the service filter.
func testEventsFilteredByTypeAndUser(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for _, ev := range []history.Event{
		{Type: history.Release, User: "Alice", Services: []string{"ns:deployment/a"}},
		{Type: history.Failed, User: "alice", Services: []string{"ns:deployment/a"}},
		{Type: history.Failed, User: "bob", Services: []string{"ns:deployment/b"}},
		{Type: history.Lock, User: "automator", Services: []string{"ns:deployment/a"}},
	} {
		ev.Instance, ev.StartedAt = "i", t0
		record(t, s, ev)
	}
	for _, tc := range []struct {
		q    history.Query
		want []string
	}{
		{history.Query{Type: history.Failed}, []string{"bob", "alice"}},
		{history.Query{User: "ALI"}, []string{"alice", "Alice"}},
		{history.Query{Type: history.Failed, User: "ali", Service: "ns:deployment/a"}, []string{"alice"}},
		{history.Query{Type: history.Rollback}, nil},
	} {
		evs, err := s.Events(ctx, "i", tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, ev.User)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.q, diff)
		}
	}
}

// Since and Until keep the events that ended in [Since, Until), with a
// service and without.
func testEventsBetween(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for i, user := range []string{"h0", "h1", "h2", "h3"} {
		at := t0.Add(time.Duration(i) * time.Hour)
		record(t, s, history.Event{Instance: "i", Type: history.Release, User: user, Services: []string{"ns:deployment/a"},
			StartedAt: at.Add(-time.Minute), EndedAt: at})
	}
	for _, tc := range []struct {
		q    history.Query
		want []string
	}{
		{history.Query{Since: t0.Add(time.Hour)}, []string{"h3", "h2", "h1"}},
		{history.Query{Until: t0.Add(time.Hour)}, []string{"h0"}},
		{history.Query{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, []string{"h2", "h1"}},
		{history.Query{Since: t0.Add(30 * time.Minute), Until: t0.Add(150 * time.Minute), Service: "ns:deployment/a"}, []string{"h2", "h1"}},
		{history.Query{Since: t0.Add(5 * time.Hour)}, nil},
	} {
		evs, err := s.Events(ctx, "i", tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, ev.User)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.q, diff)
		}
	}
}

// A job's log is kept across a reopen, read from a sequence number on,
// and only by the job's own instance; a line stored again is ignored.
func testJobLog(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	lines := []history.JobLogLine{
		{JobID: "j1", Instance: "team-a", Seq: 1, Time: t0, Stage: "cloning", Text: "fetching the git remote"},
		{JobID: "j1", Instance: "team-a", Seq: 2, Time: t0.Add(time.Second), Stage: "pushing", Text: "pushing commit abc"},
		{JobID: "j1", Instance: "team-a", Seq: 3, Time: t0.Add(2 * time.Second), Stage: "failed", Text: "the rollout of x failed"},
	}
	for _, l := range lines {
		if err := s.AppendJobLog(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendJobLog(ctx, history.JobLogLine{JobID: "j1", Instance: "team-a", Seq: 2, Time: t0, Text: "other"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendJobLog(ctx, history.JobLogLine{JobID: "j1", Instance: "team-a", Text: "no seq"}); err == nil {
		t.Error("a line without a sequence number was stored")
	}
	s = reopen()
	got, err := s.JobLog(ctx, "team-a", "j1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines, got, equalTimes); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if got, err = s.JobLog(ctx, "team-a", "j1", 2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lines[2:], got, equalTimes); diff != "" {
		t.Errorf("log after 2 (-want +got):\n%s", diff)
	}
	if other, err := s.JobLog(ctx, "team-b", "j1", 0); err != nil || len(other) != 0 {
		t.Errorf("team-b reads team-a's job log: %v, %v", other, err)
	}
	// A long log, written in batches where the store can (a report of
	// many workloads), is read in pages of MaxJobLogLines.
	n := history.MaxJobLogLines + 10
	var big []history.JobLogLine
	for i := 1; i <= n; i++ {
		big = append(big, history.JobLogLine{JobID: "big", Instance: "team-a", Seq: int64(i), Time: t0, Stage: "rolling out", Text: "line"})
	}
	if b, ok := s.(interface {
		AppendJobLogs(context.Context, []history.JobLogLine) error
	}); ok {
		if err := b.AppendJobLogs(ctx, big[:10]); err != nil {
			t.Fatal(err)
		}
		// Again, with lines already stored: they are left as they are.
		if err := b.AppendJobLogs(ctx, big); err != nil {
			t.Fatal(err)
		}
		if err := b.AppendJobLogs(ctx, []history.JobLogLine{{JobID: "big", Instance: "team-a"}}); err == nil {
			t.Error("a batch with a line without a sequence number was stored")
		}
	} else {
		for _, l := range big {
			if err := s.AppendJobLog(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := s.JobLog(ctx, "team-a", "big", 0)
	if err != nil || len(page) != history.MaxJobLogLines || page[len(page)-1].Seq != int64(history.MaxJobLogLines) {
		t.Fatalf("the first page of a long log: %d lines, %v; want %d", len(page), err, history.MaxJobLogLines)
	}
	if rest, err := s.JobLog(ctx, "team-a", "big", page[len(page)-1].Seq); err != nil || len(rest) != 10 {
		t.Errorf("the rest of a long log: %d lines, %v; want 10", len(rest), err)
	}
}

// A sync event keeps its objects one by one (each reader's view of it is
// rendered from them): they read back the same from Events, from the
// event's notice and from the export.
func testSyncDetail(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	at := time.Unix(1700000000, 0)
	d := &history.SyncDetail{
		Objects: []history.SyncObject{
			{Namespace: "a", Kind: "Deployment", Name: "web", File: "a/web.yaml", Line: 1, Action: history.SyncCreated},
			{Namespace: "b", Kind: "ConfigMap", Name: "bad", File: "b/cm.yaml", Line: 7, Action: history.SyncFailed, Error: "refused"},
			{Kind: "ClusterRole", Name: "x", Action: history.SyncDeleted},
		},
		Omitted:  map[string]int{history.SyncChanged: 3},
		Problems: []string{"c/broken.yaml:2: not YAML"},
	}
	ev := history.Event{Instance: history.SyncInstance, Type: history.Sync, User: "fluxd", Services: []string{"a:deployment/web"}, Commit: "abc",
		Message: "Sync of abc", Error: "b/cm.yaml:7: ConfigMap/b/bad: refused", Sync: d, StartedAt: at, EndedAt: at}
	ev.ID = record(t, s, ev)
	ev.Changes = []history.Change{} // as every event without changes reads back
	plain := record(t, s, history.Event{Instance: history.SyncInstance, Type: history.Sync, Message: "without objects", StartedAt: at, EndedAt: at})
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.Events(ctx, history.SyncInstance, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != plain || got[0].Sync != nil {
		t.Fatalf("events = %+v; want the plain sync first, without objects", got)
	}
	if diff := cmp.Diff(ev, got[1], equalTimes); diff != "" {
		t.Errorf("the sync event read back (-want +got):\n%s", diff)
	}
	ns, err := s.Notices(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || !cmp.Equal(d, ns[0].Event.Sync) {
		t.Errorf("the sync's notice holds %+v, want its objects %+v", ns, d)
	}
	var exported *history.SyncDetail
	if err := s.EachEvent(ctx, func(e history.Event) error {
		if e.ID == ev.ID {
			exported = e.Sync
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(d, exported) {
		t.Errorf("the export holds %+v, want %+v", exported, d)
	}
}

// A release keeps each released image's signature verification with its
// change, as data: read back, in its notice and in the export alike; a
// reader who sees one of the services sees only that service's images
// and their verifications.
func testReleaseVerification(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	at := time.Unix(1700000000, 0)
	signed := &history.Verification{Outcome: "verified", Profiles: []string{"signed"}, Digest: "sha256:aaaa",
		Detail: "profile signed: verified by key sha256:1234 (/etc/fluxd/cosign.pub)"}
	unsigned := &history.Verification{Outcome: "unsigned", Profiles: []string{"signed", "sbom"}, Digest: "sha256:bbbb",
		Detail: "profile signed: unsigned: no cosign signature for sha256:bbbb"}
	ev := history.Event{Instance: "team", Type: history.Release, User: "ops", Services: []string{"a:deployment/web", "b:deployment/api"},
		Message: "Released unverified with --allow-unverified: b:deployment/api api=r/api:2", Commit: "abc",
		Changes: []history.Change{
			{Service: "a:deployment/web", Container: "web", From: "r/web:1", To: "r/web:2", Verification: signed},
			{Service: "b:deployment/api", Container: "api", From: "r/api:1", To: "r/api:2", Verification: unsigned},
			{Service: "b:deployment/api", Container: "sidecar", From: "r/side:1", To: "r/side:2"},
		},
		StartedAt: at, EndedAt: at}
	ev.ID = record(t, s, ev)
	s = reopen()
	t.Cleanup(func() { s.Close() })
	got, err := s.Events(ctx, "team", history.Query{Service: "a:deployment/web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("events = %+v; want the release", got)
	}
	if diff := cmp.Diff(ev, got[0], equalTimes); diff != "" {
		t.Errorf("the release read back (-want +got):\n%s", diff)
	}
	ns, err := s.Notices(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || !cmp.Equal(ev.Changes, ns[0].Event.Changes) {
		t.Errorf("the release's notice holds %+v, want its changes %+v", ns, ev.Changes)
	}
	var exported []history.Change
	if err := s.EachEvent(ctx, func(e history.Event) error {
		if e.ID == ev.ID {
			exported = e.Changes
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev.Changes, exported); diff != "" {
		t.Errorf("the export's changes (-want +got):\n%s", diff)
	}
	seen, ok := got[0].For(&history.View{Service: func(id string) bool { return id == "a:deployment/web" }})
	if want := ev.Changes[:1]; !ok || !cmp.Equal(want, seen.Changes) {
		t.Errorf("a reader of a:deployment/web sees %+v (%v); want only its own image and verification %+v", seen.Changes, ok, want)
	}
}
