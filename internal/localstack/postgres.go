package localstack

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fluxd/fluxd/internal/pgserver"
)

// StartPostgres starts a PostgreSQL server for the stack's fluxd (as
// 'make up DB=postgres' does): Debian's binaries as the postgres user,
// its data, socket, log and password file under Dir/postgres, on a free
// loopback port, with a database "fluxd". Its PID is recorded in
// pids/postgres.pid, so StopDir stops it after fluxd. It returns the
// server and the database's URL (no password in it).
func (s *Stack) StartPostgres(ctx context.Context) (*pgserver.Server, string, error) {
	srv, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(s.Dir, "postgres"), Detach: s.detach})
	if err != nil {
		return nil, "", err
	}
	NoteSecret("the stack's PostgreSQL password", srv.Password)
	if err := os.WriteFile(filepath.Join(s.Dir, "pids", "postgres.pid"), []byte(strconv.Itoa(srv.PID())+"\n"), 0o644); err != nil {
		_ = srv.Stop()
		return nil, "", err
	}
	url, err := srv.CreateDatabase(ctx, "fluxd")
	if err != nil {
		_ = srv.Stop()
		return nil, "", err
	}
	return srv, url, nil
}
