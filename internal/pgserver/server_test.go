package pgserver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(RunTests(m)) }

// TestServerRestartKeepsData starts a server, writes a row, restarts the
// server and reads the row back over a new connection with the password.
func TestServerRestartKeepsData(t *testing.T) {
	s := Own(t)
	ctx := context.Background()
	url, err := s.CreateDatabase(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Password = s.Password
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := connect()
	if _, err := c.Exec(ctx, "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err == nil {
		t.Error("a connection from before the restart still answers; the server did not restart")
	}
	c = connect()
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != "kept" {
		t.Errorf("after restart: %q, %v; want kept", v, err)
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	url, _ := Database(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = "wrong"
	if c, err := pgx.ConnectConfig(context.Background(), cfg); err == nil {
		c.Close(context.Background())
		t.Fatal("connected with a wrong password: the server does not check passwords over TCP")
	}
}

// TestPrivateParentRefused: as root, a directory the postgres user cannot
// reach is refused with a message that says why, before initdb fails.
func TestPrivateParentRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root switches to the postgres user")
	}
	parent := t.TempDir() // mode 0700
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Dir: parent + "/pg"})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("Start under a private directory: %v; want a refusal saying the postgres user cannot reach it", err)
	}
}
