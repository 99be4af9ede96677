package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/storetest"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

// newStore opens a store on a new database of the shared server.
func newStore(t testing.TB) (*Store, func() *Store) {
	url, srv := pgserver.Database(t)
	open := func() *Store {
		s, err := Open(context.Background(), Config{URL: url, Password: srv.Password})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return open(), open
}

// TestContract runs the store contract (history/storetest) on a real
// PostgreSQL server.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Factory{New: func(t *testing.T) (storetest.Store, func() storetest.Store) {
		s, open := newStore(t)
		return s, func() storetest.Store { return open() }
	}})
}

func TestMigrations(t *testing.T) {
	storetest.RunMigrations(t, storetest.Migrations{
		Files:   Migrations(),
		Migrate: Migrate,
		Dialect: goose.DialectPostgres,
		Dollar:  true,
		Fresh: func(t *testing.T) (*sql.DB, func() history.Store) {
			url, srv := pgserver.Database(t)
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Password = srv.Password
			db := stdlib.OpenDB(*cfg)
			t.Cleanup(func() { db.Close() })
			return db, func() history.Store {
				s, err := Open(context.Background(), Config{URL: url, Password: srv.Password})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	})
}

// TestOpenErrorsHideThePassword: a wrong password or an unreachable server
// is reported with the URL, never the password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	url, _ := pgserver.Database(t)
	withPassword := strings.Replace(url, "fluxd@", "fluxd:s3cret-pw@", 1)
	_, err := Open(context.Background(), Config{URL: withPassword})
	if err == nil {
		t.Fatal("opened with a wrong password")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "password") {
		t.Errorf("error does not point at the password: %v", err)
	}
	_, err = Open(context.Background(), Config{URL: "postgres://fluxd:s3cret-pw@127.0.0.1:1/x?sslmode=disable", RetryFor: -1})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("unreachable server: %v; want an error without the password", err)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db?password=pw&sslmode=require", "postgresql://u@h/db?password=xxxxx&sslmode=require"},
		{"host=h user=u password='p w\\'x' dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"postgres://u:p%zz@h/db", "postgres://xxxxx@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?sslkey=/k&sslpassword=pw", "postgres://h/db?sslkey=%2Fk&sslpassword=xxxxx"},
		{"postgres://u:pw@h/db?password=pw&sslpassword=pw", "postgres://u:xxxxx@h/db?password=xxxxx&sslpassword=xxxxx"},
		{"host=h sslpassword=pw user=u", "host=h sslpassword=xxxxx user=u"},
		{"host=h SSLPassword = 'p w' password=pw", "host=h SSLPassword=xxxxx password=xxxxx"},
	} {
		if got := Redact(tc.in); got != tc.want || strings.Contains(got, "pw") {
			t.Errorf("Redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestRecordOnceWhenCommitsAnswerIsLost: the connection drops right after
// COMMIT is sent (the server commits; the client never hears it). Record
// tries again on a new connection and the event is stored once, not twice.
func TestRecordOnceWhenCommitsAnswerIsLost(t *testing.T) {
	u, srv := pgserver.Database(t)
	ctx := context.Background()
	p := newProxy(t, srv.Port)
	s, err := Open(ctx, Config{URL: p.url(t, u), Password: srv.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cut := make(chan struct{})
	p.set(func(chunk []byte) bool {
		if isCommit(chunk) {
			close(cut)
			return true
		}
		return false
	})
	id, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Release, Message: "once", Services: []string{"svc"}})
	select {
	case <-cut:
	default:
		t.Fatal("the proxy never saw COMMIT: the test did not test anything")
	}
	if err != nil {
		t.Fatalf("Record across a lost COMMIT answer: %v", err)
	}
	evs, err := s.Events(ctx, "i", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ID != id || len(evs[0].Services) != 1 {
		t.Errorf("one Record call (id %d) stored %d events: %+v; want exactly one, with its service", id, len(evs), evs)
	}
}

// TestSaveTagsRetriedOnANewConnection: the connection drops just as
// SaveTags's batch is sent (after pgx prepared its statements on it); the
// retry on a new connection stores the tags.
func TestSaveTagsRetriedOnANewConnection(t *testing.T) {
	u, srv := pgserver.Database(t)
	ctx := context.Background()
	p := newProxy(t, srv.Port)
	s, err := Open(ctx, Config{URL: p.url(t, u), Password: srv.Password, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cut := make(chan struct{})
	p.set(func(chunk []byte) bool {
		// 'B': a Bind naming a statement prepared on this connection.
		if chunk[0] == 'B' && bytes.Contains(chunk, []byte("stmtcache_")) {
			close(cut)
			return true
		}
		return false
	})
	err = s.SaveTags(ctx, "r/a", map[string]registry.TagState{"1": {Digest: "sha256:1"}, "2": {Digest: "sha256:2"}}, nil, nil)
	select {
	case <-cut:
	default:
		t.Fatal("the proxy never saw the batch: the test did not test anything")
	}
	if err != nil {
		t.Fatalf("SaveTags retried on a new connection: %v", err)
	}
	tags, err := s.CachedTags(ctx, "r/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 {
		t.Errorf("cached tags after the retry: %v; want 1 and 2", tags)
	}
}

// TestConcurrentSaveTags: replicas (here goroutines) saving the same
// repository's tags at once all succeed: rows are locked in one order, so
// the transactions wait for each other rather than deadlock.
func TestConcurrentSaveTags(t *testing.T) {
	s, _ := newStore(t)
	defer s.Close()
	ctx := context.Background()
	tags := map[string]registry.TagState{}
	images := map[string]registry.ImageMeta{}
	for i := range 300 {
		tags[strconv.Itoa(i)] = registry.TagState{Digest: "sha256:" + strconv.Itoa(i)}
		images["sha256:"+strconv.Itoa(i)] = registry.ImageMeta{Platform: "linux/amd64"}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for range 4 {
		wg.Go(func() {
			for range 15 {
				if err := s.SaveTags(ctx, "r/a", tags, images, nil); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n == 0 {
			t.Errorf("concurrent SaveTags: %v", err)
		}
		n++
	}
	if n > 0 {
		t.Errorf("%d of 60 concurrent SaveTags failed", n)
	}
}

// TestSilentServerFailsRatherThanHangs: the server stops answering without
// closing the connection (a partition: the proxy swallows everything).
// Record, a read and SaveJob each return an error (Record's saying the
// database did not answer in time) instead of waiting for ever.
func TestSilentServerFailsRatherThanHangs(t *testing.T) {
	u, srv := pgserver.Database(t)
	ctx := context.Background()
	p := newProxy(t, srv.Port)
	s, err := Open(ctx, Config{URL: p.url(t, u), Password: srv.Password, StatementTimeout: 200 * time.Millisecond, RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p.setHold(true)
	defer p.setHold(false)
	// The first runs on the pool's open connection, which goes quiet; the
	// others on new connections, which the server never answers
	// (connect_timeout's error, or the attempt's).
	ops := []struct {
		name string
		op   func() error
	}{
		{"Record", func() error {
			_, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Release})
			return err
		}},
		{"Events", func() error {
			_, err := s.Events(ctx, "i", history.Query{})
			return err
		}},
		{"SaveJob", func() error {
			_, err := s.SaveJob(ctx, history.Job{ID: "j", Instance: "i", State: history.JobQueued})
			return err
		}},
	}
	for i, o := range ops {
		name, op := o.name, o.op
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			if err == nil || i == 0 && !strings.Contains(err.Error(), "did not answer in time") {
				t.Errorf("%s with a silent server: %v; want an error saying it did not answer in time", name, err)
			}
		case <-time.After(5 * time.Minute):
			// Not a speed check: without a client-side timeout the call
			// never returns at all.
			t.Fatalf("%s with a silent server still hangs after 5 minutes", name)
		}
	}
}

// TestStatementTimeoutReachesTheServer: the server's statement_timeout is
// the configured one in whole milliseconds, rounded up (under 1 ms is 1 ms,
// not 0, which would be no timeout).
func TestStatementTimeoutReachesTheServer(t *testing.T) {
	u, srv := pgserver.Database(t)
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{500 * time.Microsecond, "1ms"},
		{1500 * time.Microsecond, "2ms"},
		{1500 * time.Millisecond, "1500ms"},
		{0, "0"},
	} {
		s, err := Open(context.Background(), Config{URL: u, Password: srv.Password, StatementTimeout: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		// With a timeout of 1 or 2 ms, the SHOW itself may be cancelled on a
		// loaded machine (SQLSTATE 57014), which proves the timeout is set
		// but not its value: ask again, a bounded number of times.
		var got string
		for try := 0; try < 100; try++ {
			err = s.pool.QueryRow(context.Background(), `SHOW statement_timeout`).Scan(&got)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
				break
			}
		}
		s.Close()
		if err != nil || got != tc.want {
			t.Errorf("StatementTimeout %v: SHOW statement_timeout = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestByteOrderUnderALanguageCollation: on a database whose default
// collation is a language's (ICU "en-US", where "_a" < "b" < "B"), an
// event's services and the cached repositories still come back in byte
// order, as SQLite returns them.
func TestByteOrderUnderALanguageCollation(t *testing.T) {
	ctx := context.Background()
	s := openCollated(t)
	defer s.Close()
	if _, err := s.Record(ctx, history.Event{Instance: "i", Type: history.Release, Services: []string{"ns:deployment/b", "ns:deployment/B", "ns:deployment/_a"}}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "i", history.Query{})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events: %v, %v", evs, err)
	}
	if diff := cmp.Diff([]string{"ns:deployment/B", "ns:deployment/_a", "ns:deployment/b"}, evs[0].Services); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	for _, repo := range []string{"b/x", "B/x", "_/x"} {
		if err := s.SaveTags(ctx, repo, map[string]registry.TagState{"1": {Digest: "sha256:1"}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := s.CachedRepositories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"B/x", "_/x", "b/x"}, repos); diff != "" {
		t.Errorf("cached repositories (-want +got):\n%s", diff)
	}
}

// openCollated opens a store on a new database whose default collation
// is ICU's "en-US" (where "_a" < "b" < "B"); it skips the test on a
// server that cannot make one.
func openCollated(t *testing.T) *Store {
	t.Helper()
	_, srv := pgserver.Database(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = srv.Password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "collated_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`); err != nil {
		t.Skipf("this server cannot make an ICU database: %v", err)
	}
	s, err := Open(ctx, Config{URL: srv.URL(name), Password: srv.Password})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTransient: which failures are tried again.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // admin shutdown
		{&pgconn.PgError{Code: "08006"}, true}, // connection failure
		{&pgconn.PgError{Code: "40P01"}, true}, // deadlock
		{&pgconn.PgError{Code: "40001"}, true}, // serialization failure
		{&pgconn.PgError{Code: "53300"}, true}, // too many connections
		{&pgconn.PgError{Code: "23505"}, false},
		{errors.New("conn closed"), true},
		{fmt.Errorf("%w: %v", errAmbiguous, errors.New("conn closed")), false},
		{context.Canceled, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

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
