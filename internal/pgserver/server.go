// Package pgserver starts a real PostgreSQL server for fluxd's tests and
// its demo stack: Debian's postgresql server binaries, run as an ordinary
// user (the server refuses to run as root), in a directory of its own, on
// a free loopback port, with password authentication over TCP.
//
// When the caller is root (CI on a fresh machine), the server and initdb
// run as the system user "postgres" that Debian's package creates. The
// switch is done with the process's credentials (setuid/setgid in the
// child, as su would) rather than by running su, so that the server is
// this process's own child: it can be stopped, restarted and waited for,
// and dies with the test when it is not detached.
package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options say how to start a server. The zero value is usable.
type Options struct {
	// Dir holds the data directory, the socket and the log. Empty: a new
	// directory under os.TempDir(), removed by Stop. Every directory
	// above it must be searchable by the "postgres" user when run as root.
	Dir string
	// BinDir holds initdb and postgres. Empty: $FLUXD_PG_BIN, else the
	// newest /usr/lib/postgresql/*/bin, else the PATH.
	BinDir string
	// User is the database superuser fluxd connects as; "fluxd" if empty.
	User string
	// Detach leaves the server running when this process exits (the
	// demo's 'make up'); otherwise it is killed with this process.
	Detach bool
}

// Server is a running PostgreSQL server.
type Server struct {
	// Dir is the server's directory: data/, the socket, postgres.log and
	// password (the superuser's password, for --history-db-password-file).
	Dir string
	// Port is the loopback TCP port it listens on.
	Port int
	// User and Password are the superuser's credentials over TCP.
	User, Password string

	bin     string
	cred    *syscall.Credential
	uid     int
	gid     int
	temp    bool
	detach  bool
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// ErrNoBinaries says that the PostgreSQL server is not installed.
var ErrNoBinaries = errors.New("PostgreSQL server binaries not found: install Debian's postgresql package (hack/deps.sh does) or set FLUXD_PG_BIN to the directory holding initdb and postgres")

// Start initialises a database cluster and starts its server, returning
// once it accepts connections.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: opts.Dir, User: opts.User, bin: bin, detach: opts.Detach, uid: -1, gid: -1}
	if s.User == "" {
		s.User = "fluxd"
	}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "fluxd-pg-"); err != nil {
			return nil, err
		}
		s.temp = true
	} else if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL must run as another user and there is no \"postgres\" user (Debian's postgresql package creates it): %w", err)
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid)}
		if err := searchable(s.Dir); err != nil {
			return nil, err
		}
		if err := os.Chown(s.Dir, s.uid, s.gid); err != nil {
			return nil, err
		}
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	s.Password = hex.EncodeToString(raw[:])
	if err := s.writeFile("password", s.Password+"\n"); err != nil {
		return nil, err
	}
	if err := s.initdb(ctx); err != nil {
		s.remove()
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		err = s.start(ctx)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// PasswordFile is the file holding the superuser's password.
func (s *Server) PasswordFile() string { return filepath.Join(s.Dir, "password") }

// URL is a connection URL for database db, without the password.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(s.User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// PID is the server process's ID (0 when it is stopped).
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// CreateDatabase creates an empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := s.connect(ctx, "postgres")
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// Stop shuts the server down (fast: open sessions are ended) and removes
// its directory if Start made it.
func (s *Server) Stop() error {
	err := s.shutdown()
	s.remove()
	return err
}

// Restart stops the server, leaves it down for down, and starts it again
// on the same port with the same data: what a database failover or an
// upgrade looks like to its clients.
func (s *Server) Restart(ctx context.Context, down time.Duration) error {
	if err := s.shutdown(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	return s.start(ctx)
}

// Shutdown stops the server and keeps its data, for Start again (Resume).
func (s *Server) Shutdown() error { return s.shutdown() }

// Resume starts a server stopped with Shutdown on the same port.
func (s *Server) Resume(ctx context.Context) error { return s.start(ctx) }

// Log returns the end of the server's log, for a test's failure message.
func (s *Server) Log() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func (s *Server) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"),
		"-D", filepath.Join(s.Dir, "data"), "-U", s.User, "--pwfile", s.PasswordFile(),
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Dir = s.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb in %s: %w\n%s", s.Dir, err, out)
	}
	return nil
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.Dir, "data"),
		"-p", strconv.Itoa(s.Port), "-k", s.Dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	if !s.detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	exited := s.exited
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited (%v); the end of its log:\n%s", s.waitErr, s.Log())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := s.connect(cctx, "postgres")
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = s.shutdown()
			return fmt.Errorf("postgres did not accept connections on port %d: %w; the end of its log:\n%s", s.Port, err, s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.URL(db))
	if err != nil {
		return nil, err
	}
	cfg.Password = s.Password
	return pgx.ConnectConfig(ctx, cfg)
}

// shutdown asks for a fast shutdown (SIGINT) and waits; SIGKILL after 20 s.
func (s *Server) shutdown() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
	return nil
}

func (s *Server) remove() {
	if s.temp {
		_ = os.RemoveAll(s.Dir)
	}
}

func (s *Server) writeFile(name, content string) error {
	p := filepath.Join(s.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return err
	}
	if s.uid >= 0 {
		return os.Chown(p, s.uid, s.gid)
	}
	return nil
}

// searchable checks that another user (postgres) may reach dir: every
// directory above it must let others search it.
func searchable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("PostgreSQL runs as the postgres user, which cannot reach %s: %s is mode %o (others may not search it); put the server's directory where others may search every parent, or chmod o+x %s", abs, d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}

func binDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("FLUXD_PG_BIN")
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
			return "", fmt.Errorf("%w (%v)", ErrNoBinaries, err)
		}
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1]), nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoBinaries
}

// version is the major version in /usr/lib/postgresql/VERSION/bin/postgres.
func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
