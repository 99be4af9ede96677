package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/history"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations are the schema's goose migrations, for tests that upgrade
// from an earlier version.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// Config says how to reach the server.
type Config struct {
	// URL is postgres://user@host:port/db?sslmode=... (or postgresql://,
	// or a key=value connection string).
	URL string
	// Password, when set, overrides the URL's and $PGPASSWORD.
	Password string
	// PasswordFile, when set, holds the password (trailing whitespace
	// dropped) and overrides Password: it is read again for every new
	// connection, so that a rotated Secret is used without a restart.
	PasswordFile string
	// MaxConns bounds the pool; 0 is pgxpool's default (4, or the CPUs).
	MaxConns int32
	// StatementTimeout ends any statement running longer (the server's
	// statement_timeout); 0 is none.
	StatementTimeout time.Duration
	// OpTimeout bounds each attempt of an operation on the client's side,
	// so that a server that went silent (a partition, a host gone without
	// a reset) fails the attempt instead of hanging it; 0 is
	// StatementTimeout plus 10 s, or 2 minutes without a StatementTimeout.
	OpTimeout time.Duration
	// NoMigrate opens the database as it is, without migrating it, and
	// refuses one whose schema is not this fluxd's newest ('fluxd db
	// copy's source, which must not change).
	NoMigrate bool
	// RetryFor is how long an operation whose connection failed (the
	// server restarting, a failover) is tried again before its error is
	// returned; 0 is 30 s, negative is no retry.
	RetryFor time.Duration
}

// Store is fluxd's store in a PostgreSQL database.
type Store struct {
	pool      *pgxpool.Pool
	retryFor  time.Duration
	opTimeout time.Duration
}

var (
	_ history.Store    = (*Store)(nil)
	_ history.Exporter = (*Store)(nil)
)

// Open connects to the database and migrates its schema to the newest
// version. Replicas starting together migrate one at a time (goose's
// session lock, a PostgreSQL advisory lock).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	where := Redact(cfg.URL)
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's message quotes the URL with any password replaced.
		return nil, fmt.Errorf("reading the PostgreSQL URL %s: %w (expected postgres://USER@HOST:PORT/DATABASE?sslmode=disable|require|verify-full)", where, err)
	}
	if cfg.Password != "" {
		pcfg.ConnConfig.Password = cfg.Password
	}
	if cfg.PasswordFile != "" {
		// Read now, so that a missing or empty file is reported at once,
		// and again before each connection (a mounted Secret is
		// replaced in place when it is rotated).
		if pcfg.ConnConfig.Password, err = ReadPasswordFile(cfg.PasswordFile); err != nil {
			return nil, err
		}
		pcfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			pw, err := ReadPasswordFile(cfg.PasswordFile)
			if err != nil {
				return err
			}
			cc.Password = pw
			return nil
		}
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.StatementTimeout > 0 {
		// Whole milliseconds, rounded up: the server reads 0 as "no
		// timeout", which a timeout under 1 ms must not become.
		ms := (cfg.StatementTimeout + time.Millisecond - 1) / time.Millisecond
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(int64(ms), 10)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "fluxd"
	// A server that vanishes without a reset (a partition, a node lost)
	// is noticed by TCP keepalive on an idle connection within about
	// 15 s + 3 x 5 s, rather than the kernel's two hours; a busy one by
	// the per-attempt timeout (OpTimeout).
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	pcfg.ConnConfig.DialFunc = dialer.DialContext
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w (is the server up and reachable? are the user, database and password (--history-db-password-file or PGPASSWORD) right? does sslmode match the server?)", where, err)
	}
	if cfg.NoMigrate {
		have, err := schemaVersion(ctx, pool)
		if err == nil {
			files, _ := fs.Glob(Migrations(), "*.sql")
			err = history.CheckSchema("the PostgreSQL database at "+where, have, int64(len(files)))
		}
		if err != nil {
			pool.Close()
			return nil, err
		}
	} else if err := migrate(ctx, pcfg, 0); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating the PostgreSQL database at %s: %w", where, err)
	}
	s := &Store{pool: pool, retryFor: cfg.RetryFor, opTimeout: cfg.OpTimeout}
	if s.retryFor == 0 {
		s.retryFor = 30 * time.Second
	}
	if s.opTimeout == 0 {
		s.opTimeout = 2 * time.Minute
		if cfg.StatementTimeout > 0 {
			s.opTimeout = cfg.StatementTimeout + 10*time.Second
		}
	}
	return s, nil
}

// ReadPasswordFile returns the password a file holds, without trailing
// whitespace (a Secret's file often ends in a newline).
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading --history-db-password-file: %w", err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" {
		return "", fmt.Errorf("--history-db-password-file %s is empty", path)
	}
	return pw, nil
}

// schemaVersion is the newest migration applied (0: none), from fluxd's
// goose table, else an earlier fluxd's goose_db_version.
func schemaVersion(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	for _, table := range []string{VersionTable, "goose_db_version"} {
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
			return 0, fmt.Errorf("reading the schema version: %w", err)
		}
		if !exists {
			continue
		}
		var v *int64
		if err := pool.QueryRow(ctx, `SELECT max(version_id) FROM `+table+` WHERE is_applied`).Scan(&v); err != nil {
			return 0, fmt.Errorf("reading the schema version: %w", err)
		}
		if v == nil {
			return 0, nil
		}
		return *v, nil
	}
	return 0, nil
}

// migrate brings the schema up to version (0: the newest).
// It uses connections of its own without the statement timeout: a
// migration (an index on a large table) may rightly run longer than any
// query of fluxd's, and a replica waiting for another's migration lock
// must not give up after a statement timeout.
func migrate(ctx context.Context, pcfg *pgxpool.Config, version int64) error {
	mcfg := pcfg.Copy()
	delete(mcfg.ConnConfig.RuntimeParams, "statement_timeout")
	mcfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, mcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return Migrate(ctx, db, version)
}

// Migrate brings the schema of db up to version (0: the newest), for
// tests of upgrades from earlier versions. fluxd's goose table and lock
// are its own (VersionTable, migrationLockID), so that a database shared
// with another goose user keeps the two apart.
func Migrate(ctx context.Context, db *sql.DB, version int64) error {
	if err := adoptLegacyTable(ctx, db); err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(locker), goose.WithTableName(VersionTable))
	if err != nil {
		return fmt.Errorf("preparing migrations: %w", err)
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

// migrationLockID is the advisory lock replicas migrate under: "fluxd_db"
// in ASCII, not goose's default, which another app's migrations take.
const migrationLockID int64 = 0x666c7578645f6462

// adoptLegacyTable copies the applied versions of a database migrated by
// an earlier fluxd, into goose's default table goose_db_version, to
// VersionTable, once, under the migration lock: without it the new table
// would be empty and every migration would run again (and fail). The old
// table stays, in case another app shares it. It is done only when fluxd's
// own tables are there, so another app's goose table alone is left alone.
// The table is created as goose creates it (its dialect's DDL, v3.30).
func adoptLegacyTable(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	var adopt bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('`+VersionTable+`') IS NULL AND to_regclass('goose_db_version') IS NOT NULL
		AND to_regclass('events') IS NOT NULL AND to_regclass('event_services') IS NOT NULL`).Scan(&adopt); err != nil {
		return fmt.Errorf("looking for an earlier fluxd's goose table: %w", err)
	}
	if !adopt {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+VersionTable+` (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL,
		is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("creating %s: %w", VersionTable, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+VersionTable+` (version_id, is_applied, tstamp)
		SELECT version_id, is_applied, tstamp FROM goose_db_version ORDER BY id`); err != nil {
		return fmt.Errorf("copying goose_db_version to %s: %w", VersionTable, err)
	}
	return tx.Commit()
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers a query, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("history database (PostgreSQL): %w", err)
	}
	return nil
}

// retry runs op again while it fails for want of a connection (the
// server restarting or failing over), backing off up to s.retryFor.
// Only operations that are safe to run twice go through it: reads and
// upserts, and Record (idempotent by its key); an error wrapping
// errAmbiguous is never tried again (Transient says no).
func (s *Store) retry(ctx context.Context, op func(context.Context) error) error {
	return s.retryWithin(ctx, s.opTimeout, op)
}

// retryWithin is retry with each attempt bounded by timeout, for an
// operation known to be larger than one statement (a batch).
func (s *Store) retryWithin(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	err := s.attempt(ctx, timeout, op)
	if err == nil || s.retryFor < 0 || !Transient(err) {
		return err
	}
	deadline := time.Now().Add(s.retryFor)
	// client-go's Backoff ends its steps once it reaches its Cap, so the
	// cap is kept here instead: every wait is at most 3 s until the
	// deadline.
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32}
	for {
		d := backoff.Step()
		if backoff.Duration > 3*time.Second {
			backoff.Duration = 3 * time.Second
		}
		if time.Now().Add(d).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
		if err = s.attempt(ctx, timeout, op); err == nil || !Transient(err) {
			return err
		}
	}
}

// attempt runs op once, for at most timeout. An attempt that ran out
// of its own time (not the caller's) is reported as errSilent, which is
// transient: the server went silent, and a new connection may find it (or
// its replacement after a failover).
func (s *Store) attempt(ctx context.Context, timeout time.Duration, op func(context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := op(actx)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		return fmt.Errorf("%w (%v): %v", errSilent, timeout, err)
	}
	return err
}

// errSilent says an attempt got no answer within the store's OpTimeout.
var errSilent = errors.New("the database did not answer in time")

// Transient reports whether err says the connection or the server went
// away (not that the statement was wrong), so the same operation may
// succeed on a new connection.
func Transient(err error) bool {
	// errAmbiguous first: its text quotes the connection error, which the
	// message checks below would take for a transient one.
	if err == nil || errors.Is(err, errAmbiguous) {
		return false
	}
	if errors.Is(err, errSilent) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exceptions; 57P01-57P03: admin shutdown, crash
		// shutdown, cannot connect now (starting up); 40001, 40P01: a
		// serialization failure or a deadlock, whose transaction was
		// rolled back whole and may succeed when run again; 53300: too
		// many connections (another replica's pool is full), which frees
		// up.
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "40001", "40P01", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe")
}

// Redact returns a connection URL or string with any password replaced,
// for logs and errors.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		// password, sslpassword (the client key's), and any other
		// *password a later libpq adds.
		q := u.Query()
		changed := false
		for k := range q {
			if strings.HasSuffix(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if i := strings.Index(dsn, "://"); i >= 0 {
		// A URL that does not parse: keep the scheme and what follows the
		// last @, whatever the user part held.
		if at := strings.LastIndex(dsn, "@"); at > i {
			return dsn[:i+3] + "xxxxx" + dsn[at:]
		}
		return dsn
	}
	return keywordPassword.ReplaceAllString(dsn, "${1}=xxxxx")
}

// keywordPassword is KEYpassword=VALUE (password, sslpassword) in a
// key=value connection string, VALUE bare or single-quoted with backslash
// escapes.
var keywordPassword = regexp.MustCompile(`(?i)\b(\w*password)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)
