package localstack

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxd/fluxd/internal/pgserver"
)

// StartPostgres starts the stack's PostgreSQL server for fluxd (as 'make
// up DB=postgres' does), once: Debian's binaries as the postgres user,
// its data, socket, log and password file under Dir/postgres, on a free
// loopback port. Its PID is recorded in pids/postgres.pid, so StopDir
// stops it after fluxd (and Stop stops it). It returns the server and
// the URL (no password in it) of a database "fluxd".
func (s *Stack) StartPostgres(ctx context.Context) (*pgserver.Server, string, error) {
	srv, err := s.postgres(ctx)
	if err != nil {
		return nil, "", err
	}
	url, err := s.database(ctx, "fluxd")
	return srv, url, err
}

// postgres starts the stack's server on first use.
func (s *Stack) postgres(ctx context.Context) (*pgserver.Server, error) {
	s.pgMu.Lock()
	defer s.pgMu.Unlock()
	if s.pg != nil {
		return s.pg, nil
	}
	// The server runs as another user (postgres, when this is root),
	// who must be able to pass through the stack's directory, which
	// os.MkdirTemp made private: search, not list.
	if fi, err := os.Stat(s.Dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
		if err := os.Chmod(s.Dir, fi.Mode().Perm()|0o011); err != nil {
			return nil, err
		}
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(s.Dir, "postgres"), Detach: s.detach})
	if err != nil {
		return nil, err
	}
	NoteSecret("the stack's PostgreSQL password", srv.Password)
	if err := os.WriteFile(filepath.Join(s.Dir, "pids", "postgres.pid"), []byte(strconv.Itoa(srv.PID())+"\n"), 0o644); err != nil {
		_ = srv.Stop()
		return nil, err
	}
	s.pg, s.pgDBs = srv, map[string]string{}
	return srv, nil
}

// database returns the URL of the stack server's database name, created
// on first use, so a fluxd started again by name finds its records.
func (s *Stack) database(ctx context.Context, name string) (string, error) {
	s.pgMu.Lock()
	defer s.pgMu.Unlock()
	if url, ok := s.pgDBs[name]; ok {
		return url, nil
	}
	url, err := s.pg.CreateDatabase(ctx, name)
	if err != nil {
		return "", err
	}
	s.pgDBs[name] = url
	return url, nil
}

// dbFlags are the flags that put the fluxd called name on the stack's
// PostgreSQL server (Options.DB "postgres"), unless extra names a
// --history-db of its own: a database per name, kept across restarts.
func (s *Stack) dbFlags(ctx context.Context, name string, extra []string) ([]string, error) {
	if s.opts.DB != "postgres" || slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--history-db=") }) {
		return nil, nil
	}
	srv, err := s.postgres(ctx)
	if err != nil {
		return nil, err
	}
	url, err := s.database(ctx, name)
	if err != nil {
		return nil, err
	}
	return []string{"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile()}, nil
}

// stopPostgres stops the stack's server, if it started one.
func (s *Stack) stopPostgres() {
	s.pgMu.Lock()
	defer s.pgMu.Unlock()
	if s.pg != nil {
		_ = s.pg.Stop()
		_ = os.Remove(filepath.Join(s.Dir, "pids", "postgres.pid"))
		s.pg = nil
	}
}
