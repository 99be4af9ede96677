package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/pgserver"
)

// TestDBCopy runs 'fluxd db copy' from a SQLite file into PostgreSQL as a
// user would (the password from a file, never printed), reads the copy
// with a store, and sees a second run refused.
func TestDBCopy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	src, err := historystore.Open(ctx, historystore.Config{URL: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Record(ctx, history.Event{Instance: "i", Type: history.Release, Services: []string{"ns:deployment/a"}, Message: "shipped"}); err != nil {
		t.Fatal(err)
	}
	src.Close()
	url, srv := pgserver.Database(t)
	run := func() (string, error) {
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"db", "copy", "--from", "sqlite://" + path, "--to", url, "--to-password-file", srv.PasswordFile()})
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := run()
	if err != nil {
		t.Fatalf("db copy: %v\n%s", err, out)
	}
	if !strings.Contains(out, "copied 1 events, 0 jobs") || strings.Contains(out, srv.Password) {
		t.Errorf("db copy printed %q; want the counts and no password", out)
	}
	dst, err := historystore.Open(ctx, historystore.Config{URL: url, PasswordFile: srv.PasswordFile()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	evs, err := dst.Events(ctx, "i", history.Query{Service: "ns:deployment/a"})
	if err != nil || len(evs) != 1 || evs[0].Message != "shipped" {
		t.Errorf("events in PostgreSQL after the copy = %+v, %v; want the shipped release", evs, err)
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "empty database only") {
		t.Errorf("second copy: %v; want a refusal saying the target must be empty", err)
	}
}

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

// TestDBCopyLeavesAnOldSourceAlone: a source at an earlier schema version
// is refused with a message saying to upgrade it, and stays at its
// version (copying does not migrate it).
func TestDBCopyLeavesAnOldSourceAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db, 3); err != nil {
		t.Fatal(err)
	}
	url, srv := pgserver.Database(t)
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"db", "copy", "--from", path, "--to", url, "--to-password-file", srv.PasswordFile()})
	err = cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "schema version 3") || !strings.Contains(err.Error(), "upgrade it") {
		t.Errorf("copying from a version-3 database: %v; want a refusal saying to upgrade it", err)
	}
	var v int64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM `+sqlite.VersionTable).Scan(&v); err != nil || v != 3 {
		t.Errorf("the source is at version %d (%v) after the copy; want it left at 3", v, err)
	}
}
