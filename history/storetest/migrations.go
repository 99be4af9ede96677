package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// Migrations describes an adapter's schema history for RunMigrations.
type Migrations struct {
	// Files are the goose migrations (NNNNN_name.sql).
	Files fs.FS
	// Fresh returns a new, empty database and a function that opens the
	// store on it (migrating it to the newest version).
	Fresh func(t *testing.T) (*sql.DB, func() history.Store)
	// Migrate brings db up to a version.
	Migrate func(ctx context.Context, db *sql.DB, version int64) error
	// Dollar says parameters are written $1, $2 (PostgreSQL), not ?.
	Dollar bool
	// Dialect is goose's name for the database, to migrate as an earlier
	// fluxd did (goose's default table, goose_db_version).
	Dialect goose.Dialect
}

// RunMigrations checks a fresh database and an upgrade from every earlier
// schema version: the database is migrated to version v, given the rows
// an older fluxd would have written at v, then opened by the store, which
// migrates it to the newest version and must read those rows.
func RunMigrations(t *testing.T, m Migrations) {
	files, err := fs.Glob(m.Files, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	latest := int64(len(files))
	for v := int64(0); v < latest; v++ {
		name := fmt.Sprintf("from version %d", v)
		if v == 0 {
			name = "fresh database"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, open := m.Fresh(t)
			if v > 0 {
				if err := m.Migrate(ctx, db, v); err != nil {
					t.Fatalf("migrating to version %d: %v", v, err)
				}
			}
			seeded := seed(t, db, v, m.Dollar)
			s := open()
			defer s.Close()
			seeded.check(t, s)
			// What the newest schema writes works too.
			if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Lock}); err != nil {
				t.Errorf("recording after the upgrade: %v", err)
			}
		})
	}
	t.Run("from goose's default table", func(t *testing.T) { runLegacyTable(t, m, latest-1) })
}

// runLegacyTable: a database an earlier fluxd migrated, with goose's
// default table goose_db_version, is opened: its applied versions are
// carried over to fluxd_goose_db_version (no migration runs again), and
// the store reads the old rows and writes.
func runLegacyTable(t *testing.T, m Migrations, v int64) {
	ctx := context.Background()
	db, open := m.Fresh(t)
	p, err := goose.NewProvider(m.Dialect, db, m.Files)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, v); err != nil {
		t.Fatalf("migrating to version %d with goose's default table: %v", v, err)
	}
	seeded := seed(t, db, v, m.Dollar)
	s := open()
	defer s.Close()
	seeded.check(t, s)
	if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Lock}); err != nil {
		t.Errorf("recording after the upgrade: %v", err)
	}
	var applied int64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM fluxd_goose_db_version`).Scan(&applied); err != nil {
		t.Fatalf("reading fluxd_goose_db_version: %v", err)
	}
	if latest := int64(mustCount(t, m.Files)); applied != latest {
		t.Errorf("fluxd_goose_db_version is at version %d; want %d", applied, latest)
	}
}

func mustCount(t *testing.T, files fs.FS) int {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// seeded says which tables held rows before the upgrade.
type seeded struct{ events, jobs, registry bool }

var seedTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// seed writes, with the columns each table had when it was created, what
// an older fluxd kept at version v.
func seed(t *testing.T, db *sql.DB, v int64, dollar bool) seeded {
	t.Helper()
	exec := func(query string, args ...any) {
		t.Helper()
		if dollar {
			for i := 1; strings.Contains(query, "?"); i++ {
				query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
			}
		}
		if _, err := db.Exec(query, args...); err != nil {
			t.Fatalf("seeding version %d: %s: %v", v, query, err)
		}
	}
	var s seeded
	if v >= 1 {
		exec(`INSERT INTO events (instance, type, "user", message, changes, commit_id, error, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			"old", "release", "alice", "before the upgrade", `[{"service":"ns:deployment/a","container":"c","from":"r/a:1","to":"r/a:2"}]`, "abc", "", seedTime.UnixNano(), seedTime.UnixNano())
		exec(`INSERT INTO event_services (event_id, instance, service) VALUES (?, ?, ?)`, 1, "old", "ns:deployment/a")
		s.events = true
	}
	if v >= 2 {
		exec(`INSERT INTO jobs (id, instance, state, stage, spec, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			"oldjob", "old", "queued", "queued", `{"services":["ns:deployment/a"]}`, seedTime.UnixNano())
		s.jobs = true
	}
	if v >= 3 {
		exec(`INSERT INTO registry_tags (repository, tag, digest, checked_at) VALUES (?, ?, ?, ?)`, "r/a", "2", "sha256:two", seedTime.UnixNano())
		exec(`INSERT INTO registry_images (digest, created_at) VALUES (?, ?)`, "sha256:two", seedTime.UnixNano())
		s.registry = true
	}
	return s
}

func (s seeded) check(t *testing.T, st history.Store) {
	t.Helper()
	ctx := context.Background()
	evs, err := st.Events(ctx, "old", history.Query{Service: "ns:deployment/a"})
	if err != nil {
		t.Fatal(err)
	}
	if s.events {
		want := []history.Event{{ID: 1, Instance: "old", Type: history.Release, Services: []string{"ns:deployment/a"}, User: "alice", Message: "before the upgrade",
			Changes: []history.Change{{Service: "ns:deployment/a", Container: "c", From: "r/a:1", To: "r/a:2"}}, Commit: "abc", StartedAt: seedTime, EndedAt: seedTime}}
		if diff := cmp.Diff(want, evs, equalTimes); diff != "" {
			t.Errorf("event from before the upgrade (-want +got):\n%s", diff)
		}
	} else if len(evs) != 0 {
		t.Errorf("events in a fresh database: %v", evs)
	}
	live, err := st.LiveJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.jobs {
		if len(live) != 1 || live[0].ID != "oldjob" || live[0].Checksum != "" || !live[0].CreatedAt.Equal(seedTime) {
			t.Errorf("live jobs after the upgrade = %+v; want the queued oldjob, no checksum", live)
		}
	} else if len(live) != 0 {
		t.Errorf("jobs in a fresh database: %v", live)
	}
	tags, err := st.CachedTags(ctx, "r/a")
	if err != nil {
		t.Fatal(err)
	}
	if s.registry {
		want := map[string]registry.CachedTag{"2": {Digest: "sha256:two", CreatedAt: seedTime, HasCreated: true}}
		if diff := cmp.Diff(want, tags, equalTimes); diff != "" {
			t.Errorf("registry cache after the upgrade (-want +got):\n%s", diff)
		}
	} else if len(tags) != 0 {
		t.Errorf("cached tags in a fresh database: %v", tags)
	}
}
