package pgserver

import (
	"context"
	"os"
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
