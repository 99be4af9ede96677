package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
)

// The benchmarks below compare builds of the cgo driver (dynamic against
// static linking, see README "Container image"): run them with
//
//	go test -run '^$' -bench . ./history/sqlite/
//	go test -run '^$' -bench . -tags 'netgo osusergo sqlite_omit_load_extension' \
//	    -ldflags '-linkmode external -extldflags -static' ./history/sqlite/

func benchEvent(i int) history.Event {
	return history.Event{
		Instance: "bench", Type: history.Release,
		Services: []string{fmt.Sprintf("default:deployment/app-%d", i%50), "default:deployment/shared"},
		User:     "alice", Message: "release", Commit: "0123456789abcdef0123456789abcdef01234567",
		Changes: []history.Change{{
			Service: fmt.Sprintf("default:deployment/app-%d", i%50), Container: "app",
			From: "registry.example/app:1.0.0", To: "registry.example/app:1.0.1",
		}},
		StartedAt: time.Unix(1_700_000_000, 0).Add(time.Duration(i) * time.Second),
	}
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "history.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkRecord is one event with two services, one transaction each, on a
// WAL database with synchronous=NORMAL (fluxd's settings).
func BenchmarkRecord(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Record(ctx, benchEvent(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkEvents reads the newest 100 events of one service out of 10,000.
func BenchmarkEvents(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	for i := range 10_000 {
		if _, err := s.Record(ctx, benchEvent(i)); err != nil {
			b.Fatal(err)
		}
	}
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
}
