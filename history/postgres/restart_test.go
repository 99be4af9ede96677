package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/registry"
)

// TestServerRestartLosesNothing: jobs saved, events recorded and tags
// cached while the
// server restarts (down for 7 s) are all kept: the store reconnects
// and tries the lost operations again, with backoff, for longer than
// client-go's capped Backoff would have (it stops at its cap).
func TestServerRestartLosesNothing(t *testing.T) {
	srv := pgserver.Own(t)
	ctx := context.Background()
	url, err := srv.CreateDatabase(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{URL: url, Password: srv.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		restarted <- srv.Restart(ctx, 7*time.Second)
	}()
	const n = 60
	for i := range n {
		id := fmt.Sprintf("j%d", i)
		if _, err := s.SaveJob(ctx, history.Job{ID: id, Instance: "i", State: history.JobSucceeded, CreatedAt: time.Now()}); err != nil {
			t.Fatalf("saving %s across the restart: %v", id, err)
		}
		if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Release, Message: id}); err != nil {
			t.Fatalf("recording %s across the restart: %v", id, err)
		}
		tag := map[string]registry.TagState{id: {Digest: "sha256:" + id}}
		if err := s.SaveTags(ctx, "r/a", tag, map[string]registry.ImageMeta{"sha256:" + id: {Platform: "linux/amd64"}}, nil); err != nil {
			t.Fatalf("saving tag %s across the restart: %v", id, err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Jobs(ctx, "i", 1000)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "i", history.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := s.CachedTags(ctx, "r/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != n || len(evs) != n || len(tags) != n {
		t.Errorf("after the restart: %d jobs, %d events and %d cached tags; want %d of each", len(jobs), len(evs), len(tags), n)
	}
}

// TestRotatedPasswordFile: the password is changed on the server and in
// --history-db-password-file (a rotated Secret); once the pool's
// connections are gone, new ones use the new password and writes work,
// without reopening the store.
func TestRotatedPasswordFile(t *testing.T) {
	srv := pgserver.Own(t)
	ctx := context.Background()
	url, err := srv.CreateDatabase(ctx, "rotate")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte(srv.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{URL: url, PasswordFile: file, RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.pool.Exec(ctx, `ALTER ROLE `+srv.User+` PASSWORD 'rotated-pw-2'`); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("rotated-pw-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.pool.Reset() // every connection is new from here on
	if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Release, Message: "after the rotation"}); err != nil {
		t.Fatalf("recording after the password was rotated: %v", err)
	}
	if _, err := s.SaveJob(ctx, history.Job{ID: "j", Instance: "i", State: history.JobQueued}); err != nil {
		t.Fatalf("saving a job after the password was rotated: %v", err)
	}
}
