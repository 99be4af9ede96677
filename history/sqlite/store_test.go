package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/storetest"
)

// TestContract runs the store contract (history/storetest) on a real
// SQLite file.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Factory{New: func(t *testing.T) (storetest.Store, func() storetest.Store) {
		path := filepath.Join(t.TempDir(), "history.db")
		open := func() storetest.Store {
			s, err := Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(), open
	}})
}

func TestMigrations(t *testing.T) {
	storetest.RunMigrations(t, storetest.Migrations{
		Files:   Migrations(),
		Migrate: Migrate,
		Dialect: goose.DialectSQLite3,
		Fresh: func(t *testing.T) (*sql.DB, func() history.Store) {
			path := filepath.Join(t.TempDir(), "history.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db, func() history.Store {
				s, err := Open(context.Background(), path)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	})
}

func TestOpenBadPath(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir", "h.db"))
	if err == nil {
		t.Fatal("Open succeeded in a missing directory")
	}
}
