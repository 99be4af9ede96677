package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/pgserver"
)

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		kind   Kind
		target string
		err    string
	}{
		{in: "/var/lib/fluxd/history.db", kind: SQLite, target: "/var/lib/fluxd/history.db"},
		{in: "history.db", kind: SQLite, target: "history.db"},
		{in: "sqlite:///var/lib/fluxd/history.db", kind: SQLite, target: "/var/lib/fluxd/history.db"},
		{in: "sqlite://rel/h.db", kind: SQLite, target: "rel/h.db"},
		{in: "postgres://fluxd@db:5432/fluxd?sslmode=require", kind: Postgres, target: "postgres://fluxd@db:5432/fluxd?sslmode=require"},
		{in: "postgresql://fluxd@db/fluxd", kind: Postgres, target: "postgresql://fluxd@db/fluxd"},
		{in: "", err: "empty"},
		{in: "sqlite://", err: "names no file"},
		{in: "mysql://u@h/db", err: `unknown database kind "mysql"`},
	} {
		kind, target, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v; want one saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || kind != tc.kind || target != tc.target {
			t.Errorf("Parse(%q) = %s, %q, %v; want %s, %q", tc.in, kind, target, err, tc.kind, tc.target)
		}
	}
}

func TestValidateReportsEverything(t *testing.T) {
	t.Parallel()
	err := Config{URL: "sqlite:///x.db", PasswordFile: "/p", MaxConns: -1, StatementTimeout: -time.Second}.Validate()
	for _, want := range []string{"a SQLite file has no password", "--history-db-max-conns", "--history-db-statement-timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to say %q", err, want)
		}
	}
	if err := (Config{URL: "postgres://u@h/db", MaxConns: MaxConnsLimit + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "--history-db-max-conns") {
		t.Errorf("Validate() with MaxConns %d = %v; want it refused", MaxConnsLimit+1, err)
	}
	if err := (Config{URL: "postgres://u@h/db", MaxConns: MaxConnsLimit}).Validate(); err != nil {
		t.Errorf("Validate() with MaxConns %d = %v; want it accepted", MaxConnsLimit, err)
	}
}

func TestOpenSQLiteURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(context.Background(), Config{URL: "sqlite://" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Record(context.Background(), history.Event{Instance: "i", Type: history.Lock}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("sqlite:// URL did not make the file at %s: %v", path, err)
	}
}

// TestPasswordFromFileOrEnvironment: the password comes from
// --history-db-password-file, else $PGPASSWORD; without either the
// server refuses the connection.
func TestPasswordFromFileOrEnvironment(t *testing.T) {
	url, srv := pgserver.Database(t)
	ctx := context.Background()
	t.Setenv("PGPASSWORD", "")
	if s, err := Open(ctx, Config{URL: url}); err == nil {
		s.Close()
		t.Fatal("connected without a password")
	}
	s, err := Open(ctx, Config{URL: url, PasswordFile: srv.PasswordFile()})
	if err != nil {
		t.Fatalf("with --history-db-password-file: %v", err)
	}
	s.Close()
	t.Setenv("PGPASSWORD", srv.Password)
	s, err = Open(ctx, Config{URL: url})
	if err != nil {
		t.Fatalf("with PGPASSWORD: %v", err)
	}
	s.Close()
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := Open(ctx, Config{URL: url, PasswordFile: empty}); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty password file: %v; want it named empty", err)
	}
}

// TestStartWaitsForADatabaseThatIsDown: with the server down, Start
// returns, every call says the database is not connected yet, and once
// the server is up the store connects and works.
func TestStartWaitsForADatabaseThatIsDown(t *testing.T) {
	srv := pgserver.Own(t)
	ctx := context.Background()
	url, err := srv.CreateDatabase(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Config{URL: url, PasswordFile: srv.PasswordFile()}, quiet)
	if err != nil {
		t.Fatalf("Start with the database down: %v; want it to wait", err)
	}
	defer c.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Ping with the database down = %v; want ErrNotConnected", err)
	} else if why := err.Error(); strings.Contains(why, strconv.Itoa(srv.Port)) || strings.Contains(why, "user=") || strings.Contains(why, "late") {
		// /readyz shows it to anyone: no host, user or database name.
		t.Errorf("Ping's error names the server, user or database: %q", why)
	}
	if _, err := c.SaveJob(ctx, history.Job{ID: "j", Instance: "i", State: history.JobQueued}); !errors.Is(err, ErrNotConnected) {
		t.Errorf("SaveJob with the database down = %v; want ErrNotConnected", err)
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Wait(wctx); err != nil {
		t.Fatalf("the store did not connect once the server was up: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping once connected: %v", err)
	}
	if _, err := c.SaveJob(ctx, history.Job{ID: "j", Instance: "i", State: history.JobQueued}); err != nil {
		t.Errorf("SaveJob once connected: %v", err)
	}
}

func TestStartSQLiteBadPathFails(t *testing.T) {
	if _, err := Start(context.Background(), Config{URL: filepath.Join(t.TempDir(), "no", "dir", "h.db")}, quiet); err == nil {
		t.Error("Start succeeded on a SQLite file in a missing directory; want the error at once")
	}
}

func pgDatabase(t *testing.T) (string, *pgserver.Server) { return pgserver.Database(t) }
