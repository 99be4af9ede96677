package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
)

// Store is a history.Store that can also list everything it holds.
type Store interface {
	history.Store
	history.Exporter
}

// Kind is the database behind a --history-db value.
type Kind string

// The kinds of database.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// Config says which database to open and how.
type Config struct {
	// URL is a file path, sqlite:///path, or postgres://... .
	URL string
	// PasswordFile holds PostgreSQL's password (trailing whitespace is
	// dropped), read for every new connection (a rotated Secret works
	// without a restart); without it pgx reads $PGPASSWORD (or ~/.pgpass).
	PasswordFile string
	// MaxConns bounds PostgreSQL's connection pool; 0 is pgx's default.
	MaxConns int
	// StatementTimeout ends a PostgreSQL statement that runs longer; 0 is
	// none.
	StatementTimeout time.Duration
	// NoMigrate opens the database as it is (a SQLite file read-only),
	// refusing one whose schema is not this fluxd's newest: the source of
	// 'fluxd db copy'.
	NoMigrate bool
}

// MaxConnsLimit is the most --history-db-max-conns allows: PostgreSQL's
// default max_connections is 100, shared by every replica.
const MaxConnsLimit = 1000

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	kind, _, err := Parse(c.URL)
	if err != nil {
		errs = append(errs, err)
	}
	if kind == SQLite && c.PasswordFile != "" {
		errs = append(errs, errors.New("--history-db-password-file is for a PostgreSQL --history-db; a SQLite file has no password"))
	}
	if c.MaxConns < 0 || c.MaxConns > MaxConnsLimit {
		errs = append(errs, fmt.Errorf("--history-db-max-conns %d: use 0 (pgx's default: 4, or the number of CPUs) up to %d (every replica opens this many; the server's max_connections bounds them all)", c.MaxConns, MaxConnsLimit))
	}
	if c.StatementTimeout < 0 {
		errs = append(errs, fmt.Errorf("--history-db-statement-timeout %s: use 0 (none) or more", c.StatementTimeout))
	}
	return errors.Join(errs...)
}

// Parse says what database url names: SQLite and the file's path, or
// PostgreSQL and the URL itself.
func Parse(url string) (Kind, string, error) {
	switch {
	case url == "":
		return "", "", errors.New("--history-db is empty: give a SQLite file path, sqlite:///path or postgres://USER@HOST:PORT/DB")
	case strings.HasPrefix(url, "sqlite://"):
		path := strings.TrimPrefix(url, "sqlite://")
		if path == "" {
			return "", "", fmt.Errorf("--history-db %s names no file: use sqlite:///absolute/path or sqlite://relative/path", url)
		}
		return SQLite, path, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return Postgres, url, nil
	case strings.Contains(url, "://"):
		scheme, _, _ := strings.Cut(url, "://")
		return "", "", fmt.Errorf("--history-db: unknown database kind %q: use a file path or sqlite:///path for SQLite, postgres://... for PostgreSQL", scheme)
	}
	return SQLite, url, nil
}

// Redact is url fit for a log line or an error: a PostgreSQL URL with
// its password replaced.
func Redact(url string) string {
	if kind, _, err := Parse(url); err == nil && kind == SQLite {
		return url
	}
	return postgres.Redact(url)
}

// Open opens the database once: an unreachable server is an error.
func Open(ctx context.Context, cfg Config) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kind, target, _ := Parse(cfg.URL)
	if kind == SQLite && cfg.NoMigrate {
		return sqlite.OpenExisting(ctx, target)
	}
	if kind == SQLite {
		return sqlite.Open(ctx, target)
	}
	return postgres.Open(ctx, postgres.Config{URL: target, PasswordFile: cfg.PasswordFile, MaxConns: int32(cfg.MaxConns), StatementTimeout: cfg.StatementTimeout, NoMigrate: cfg.NoMigrate})
}
