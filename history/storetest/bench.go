package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// BenchFactory makes stores for the benchmarks.
type BenchFactory struct {
	// New returns a store on an empty database.
	New func(b *testing.B) history.Store
	// SeedEvents writes n events of instance "bench" straight into the
	// database (one statement, not n Records: the benchmark is the read).
	// Event i concerns "default:deployment/app-(i mod 1000)" and
	// "default:deployment/shared".
	SeedEvents func(b *testing.B, s history.Store, n int)
}

// RunBenchmarks measures what the issue asks on both backends: history of
// one service among 100,000 events, loading 100,000 cached tags, and job
// queue operations.
func RunBenchmarks(b *testing.B, f BenchFactory) {
	ctx := context.Background()
	b.Run("EventsOfOneServiceAmong100k", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		f.SeedEvents(b, s, 100_000)
		b.ReportAllocs()
		for b.Loop() {
			// 100 of the 100,000 events concern app-7.
			evs, err := s.Events(ctx, "bench", history.Query{Service: "default:deployment/app-7"})
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) != 100 {
				b.Fatalf("got %d events, want 100", len(evs))
			}
		}
	})
	b.Run("EventsNewest100Among100k", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		f.SeedEvents(b, s, 100_000)
		b.ReportAllocs()
		for b.Loop() {
			evs, err := s.Events(ctx, "bench", history.Query{Service: "default:deployment/shared"})
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) != 100 {
				b.Fatalf("got %d events, want 100", len(evs))
			}
		}
	})
	b.Run("Record", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.Record(ctx, history.Event{Instance: "bench", Type: history.Release, Services: []string{fmt.Sprintf("default:deployment/app-%d", i%50), "default:deployment/shared"},
				Changes: []history.Change{{Service: "default:deployment/app", Container: "app", From: "r/app:1", To: "r/app:2"}}}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	// A start-up sync of a big cluster: one event naming 2,000 services
	// (docs/performance.md, "Where the store becomes the limit").
	b.Run("RecordSyncOf2000", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		svcs := make([]string, 2000)
		for i := range svcs {
			svcs[i] = fmt.Sprintf("ns-%d:deployment/app-%d", i%20, i)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Record(ctx, history.Event{Instance: "bench", Type: history.Sync, Services: svcs}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CachedTags100k", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		tags := make(map[string]registry.TagState, 100_000)
		images := make(map[string]registry.ImageMeta, 100_000)
		for i := range 100_000 {
			d := fmt.Sprintf("sha256:%064d", i)
			tags[fmt.Sprintf("1.%d.%d", i/1000, i%1000)] = registry.TagState{Digest: d}
			images[d] = registry.ImageMeta{CreatedAt: time.Unix(int64(1_700_000_000+i), 0), Platform: "linux/amd64"}
		}
		if err := s.SaveTags(ctx, "reg.example/big", tags, images, nil); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			got, err := s.CachedTags(ctx, "reg.example/big")
			if err != nil {
				b.Fatal(err)
			}
			if len(got) != 100_000 {
				b.Fatalf("got %d tags", len(got))
			}
		}
	})
	// A job's life in the queue: saved queued, running, then finished.
	b.Run("JobSaveQueuedRunningDone", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			j := history.Job{ID: fmt.Sprintf("job-%d", i), Instance: "bench", State: history.JobQueued, Stage: "queued", Spec: []byte(`{"services":["default:deployment/app"]}`), CreatedAt: time.Now()}
			for _, st := range []history.JobState{history.JobQueued, history.JobRunning, history.JobSucceeded} {
				j.State = st
				if _, err := s.SaveJob(ctx, j); err != nil {
					b.Fatal(err)
				}
			}
			i++
		}
	})
	// What a starting leader reads: the live jobs among 10,000 finished.
	b.Run("LiveJobsAmong10k", func(b *testing.B) {
		s := f.New(b)
		defer s.Close()
		for i := range 10_000 {
			st := history.JobSucceeded
			if i%2000 == 0 {
				st = history.JobQueued
			}
			if _, err := s.SaveJob(ctx, history.Job{ID: fmt.Sprintf("job-%d", i), Instance: "bench", State: st, CreatedAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			live, err := s.LiveJobs(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(live) != 5 {
				b.Fatalf("got %d live jobs", len(live))
			}
		}
	})
}
