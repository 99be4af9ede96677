package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/fluxd/fluxd/history"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a history store in one SQLite file.
type Store struct {
	db *sql.DB
}

// Open opens (creating if needed) the database at path and migrates its
// schema to the newest version.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("history database path is empty")
	}
	dsn := "file:" + path + "?_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening history database %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening history database %s: %w (check that its directory exists and is writable)", path, err)
	}
	if err := Migrate(ctx, db, 0); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating history database %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// OpenExisting opens the database at path read-only, without migrating
// it, and checks that its schema is this fluxd's newest (the source of a
// copy must not be changed).
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("history database path is empty")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening history database %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000&_foreign_keys=on")
	if err != nil {
		return nil, fmt.Errorf("opening history database %s: %w", path, err)
	}
	have, err := schemaVersion(ctx, db)
	if err == nil {
		files, _ := fs.Glob(Migrations(), "*.sql")
		err = history.CheckSchema("the SQLite database "+path, have, int64(len(files)))
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db}, nil
}

// schemaVersion is the newest migration applied to db (0: none), from
// fluxd's goose table, else an earlier fluxd's goose_db_version.
func schemaVersion(ctx context.Context, db *sql.DB) (int64, error) {
	for _, table := range []string{VersionTable, "goose_db_version"} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
			return 0, fmt.Errorf("reading the schema version: %w", err)
		}
		if n == 0 {
			continue
		}
		var v sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM `+table+` WHERE is_applied`).Scan(&v); err != nil {
			return 0, fmt.Errorf("reading the schema version: %w", err)
		}
		return v.Int64, nil
	}
	return 0, nil
}

// Migrate brings the schema of db up to version (0: the newest), for
// tests of upgrades from earlier versions. fluxd's goose table is its own
// (VersionTable).
func Migrate(ctx context.Context, db *sql.DB, version int64) error {
	if err := adoptLegacyTable(ctx, db); err != nil {
		return fmt.Errorf("adopting an earlier fluxd's migration table: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, Migrations(), goose.WithTableName(VersionTable))
	if err != nil {
		return fmt.Errorf("preparing history migrations: %w", err)
	}
	if version == 0 {
		_, err = p.Up(ctx)
	} else {
		_, err = p.UpTo(ctx, version)
	}
	return err
}

// VersionTable is goose's table of applied migrations, named for fluxd.
const VersionTable = "fluxd_goose_db_version"

// adoptLegacyTable copies the applied versions of a file migrated by an
// earlier fluxd, into goose's default table goose_db_version, to
// VersionTable, once (in one transaction, which SQLite serialises):
// without it every migration would run again (and fail). It is done only
// when fluxd's own tables are there; the old table stays. The table is
// created as goose creates it (its dialect's DDL, v3.30).
func adoptLegacyTable(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version') +
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events') -
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '`+VersionTable+`')`).Scan(&n); err != nil {
		return err
	}
	if n != 2 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+VersionTable+` (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		version_id INTEGER NOT NULL,
		is_applied INTEGER NOT NULL,
		tstamp TIMESTAMP DEFAULT (datetime('now')))`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+VersionTable+` (version_id, is_applied, tstamp)
		SELECT version_id, is_applied, tstamp FROM goose_db_version ORDER BY id`); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the database answers a query, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("history database: %w", err)
	}
	return nil
}

// Record stores ev and returns its ID. ev.Instance is required.
func (s *Store) Record(ctx context.Context, ev history.Event) (int64, error) {
	if ev.Instance == "" {
		return 0, errors.New("recording an event without an instance")
	}
	ev = ev.Clean()
	changes, err := json.Marshal(ev.Changes)
	if err != nil {
		return 0, err
	}
	if ev.Changes == nil {
		changes = []byte("[]")
	}
	sync, err := history.EncodeSync(ev.Sync)
	if err != nil {
		return 0, err
	}
	if ev.StartedAt.IsZero() {
		ev.StartedAt = time.Now()
	}
	if ev.EndedAt.IsZero() {
		ev.EndedAt = ev.StartedAt
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("recording history: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx,
		`INSERT INTO events (instance, type, user, message, changes, commit_id, error, started_at, ended_at, sync)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.Instance, string(ev.Type), ev.User, ev.Message, string(changes), ev.Commit, ev.Error,
		ev.StartedAt.UnixNano(), ev.EndedAt.UnixNano(), sync)
	if err != nil {
		return 0, fmt.Errorf("recording history: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	for _, svc := range ev.Services {
		if _, err := tx.ExecContext(ctx,
			`INSERT OR IGNORE INTO event_services (event_id, instance, service) VALUES (?, ?, ?)`,
			id, ev.Instance, svc); err != nil {
			return 0, fmt.Errorf("recording history: %w", err)
		}
	}
	// The event's notice, in its transaction: stored together or not at
	// all.
	ev.ID = id
	if _, err := addNotice(ctx, tx, history.Notice{Event: ev, CreatedAt: ev.EndedAt}); err != nil {
		return 0, fmt.Errorf("recording history: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("recording history: %w", err)
	}
	return id, nil
}

// Events returns the instance's events matching q, newest first.
func (s *Store) Events(ctx context.Context, instance string, q history.Query) ([]history.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT e.id, e.type, e.user, e.message, e.changes, e.commit_id, e.error, e.started_at, e.ended_at, e.sync,
	                 COALESCE((SELECT group_concat(service, char(10)) FROM event_services s WHERE s.event_id = e.id), '')
	          FROM events e WHERE e.instance = ?`
	args := []any{instance}
	order := ` ORDER BY e.id DESC LIMIT ?`
	if q.Service != "" {
		// From the service's index (instance, service, event_id DESC) to
		// its events: no scan of the instance's other events, no sort.
		query = strings.Replace(query, `FROM events e WHERE e.instance = ?`,
			`FROM event_services f JOIN events e ON e.id = f.event_id WHERE f.instance = ? AND f.service = ?`, 1)
		args = append(args, q.Service)
		order = ` ORDER BY f.event_id DESC LIMIT ?`
	}
	if q.Type != "" {
		query += ` AND e.type = ?`
		args = append(args, string(q.Type))
	}
	if q.User != "" {
		query += ` AND instr(lower(e.user), lower(?)) > 0`
		args = append(args, q.User)
	}
	if !q.Since.IsZero() {
		query += ` AND e.ended_at >= ?`
		args = append(args, q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		query += ` AND e.ended_at < ?`
		args = append(args, q.Until.UnixNano())
	}
	query += order
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading history: %w", err)
	}
	defer rows.Close()
	out := []history.Event{}
	for rows.Next() {
		var (
			ev             history.Event
			typ, changes   string
			started, ended int64
			services, sync string
		)
		if err := rows.Scan(&ev.ID, &typ, &ev.User, &ev.Message, &changes, &ev.Commit, &ev.Error, &started, &ended, &sync, &services); err != nil {
			return nil, fmt.Errorf("reading history: %w", err)
		}
		ev.Instance, ev.Type = instance, history.Type(typ)
		ev.StartedAt, ev.EndedAt = time.Unix(0, started), time.Unix(0, ended)
		if services != "" {
			ev.Services = strings.Split(services, "\n")
		}
		if err := json.Unmarshal([]byte(changes), &ev.Changes); err != nil {
			return nil, fmt.Errorf("reading history event %d: %w", ev.ID, err)
		}
		if ev.Sync, err = history.DecodeSync(sync); err != nil {
			return nil, fmt.Errorf("reading history event %d: %w", ev.ID, err)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

var _ history.Store = (*Store)(nil)

// Migrations are the schema's goose migrations, for tests that upgrade
// from an earlier version.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}
