package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/storetest"
)

// The benchmarks are the store contract's (history/storetest), the same
// on PostgreSQL. They also compare builds of the cgo driver (dynamic
// against static linking, see README "Container image"):
//
//	go test -run '^$' -bench . ./history/sqlite/
//	go test -run '^$' -bench . -tags 'netgo osusergo sqlite_omit_load_extension' \
//	    -ldflags '-linkmode external -extldflags -static' ./history/sqlite/
func BenchmarkStore(b *testing.B) {
	paths := map[history.Store]string{}
	storetest.RunBenchmarks(b, storetest.BenchFactory{
		New: func(b *testing.B) history.Store {
			path := filepath.Join(b.TempDir(), "history.db")
			s, err := Open(context.Background(), path)
			if err != nil {
				b.Fatal(err)
			}
			paths[s] = path
			return s
		},
		SeedEvents: func(b *testing.B, s history.Store, n int) {
			db, err := sql.Open("sqlite3", "file:"+paths[s]+"?_busy_timeout=5000")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
				INSERT INTO events (instance, type, user, message, changes, commit_id, error, started_at, ended_at)
				SELECT 'bench', 'release', 'alice', 'release ' || i, '[{"service":"default:deployment/app","container":"app","from":"r/app:1","to":"r/app:2"}]', 'c0ffee', '', i, i FROM n`, n); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO event_services (event_id, instance, service)
				SELECT id, 'bench', 'default:deployment/app-' || (id % 1000) FROM events
				UNION ALL SELECT id, 'bench', 'default:deployment/shared' FROM events`); err != nil {
				b.Fatal(err)
			}
		},
	})
}
