package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/storetest"
	"github.com/fluxd/fluxd/internal/pgserver"
)

// BenchmarkStore is the store contract's benchmarks (history/storetest),
// on a real PostgreSQL server on loopback:
//
//	go test -run '^$' -bench . ./history/postgres/
func BenchmarkStore(b *testing.B) {
	urls := map[history.Store]string{}
	var srv *pgserver.Server
	storetest.RunBenchmarks(b, storetest.BenchFactory{
		New: func(b *testing.B) history.Store {
			var url string
			url, srv = pgserver.Database(b)
			s, err := Open(context.Background(), Config{URL: url, Password: srv.Password})
			if err != nil {
				b.Fatal(err)
			}
			urls[s] = url
			return s
		},
		SeedEvents: func(b *testing.B, s history.Store, n int) {
			ctx := context.Background()
			cfg, err := pgx.ParseConfig(urls[s])
			if err != nil {
				b.Fatal(err)
			}
			cfg.Password = srv.Password
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `INSERT INTO events (instance, type, "user", message, changes, commit_id, error, started_at, ended_at)
				SELECT 'bench', 'release', 'alice', 'release ' || i, '[{"service":"default:deployment/app","container":"app","from":"r/app:1","to":"r/app:2"}]', 'c0ffee', '', i, i
				FROM generate_series(1, $1) AS i`, n); err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO event_services (event_id, instance, service)
				SELECT id, 'bench', 'default:deployment/app-' || (id % 1000) FROM events
				UNION ALL SELECT id, 'bench', 'default:deployment/shared' FROM events;
				ANALYZE events; ANALYZE event_services`); err != nil {
				b.Fatal(err)
			}
		},
	})
}
