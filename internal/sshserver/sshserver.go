package sshserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sshd is where Debian's openssh-server installs the daemon.
const Sshd = "/usr/sbin/sshd"

// Server is an sshd prepared in a directory.
type Server struct {
	// Dir holds its host key, config and authorized keys.
	Dir string
	// Addr is its loopback host:port.
	Addr string
	// User is the user clients log in as (root).
	User string
}

// Prepare writes an sshd's host key, config and (empty) authorized keys
// into dir, on a free loopback port. It fails when sshd, ssh-keygen or
// git-shell is not installed, or when not run as root.
func Prepare(ctx context.Context, dir string) (*Server, error) {
	for _, bin := range []string{Sshd, "ssh-keygen", "ssh-keyscan", "git-shell"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (run hack/deps.sh: Debian's openssh-server and git): %w", bin, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("sshd serves other users only when run as root")
	}
	// sshd's privilege separation directory is compiled in; it refuses
	// to start without it ("Missing privilege separation directory").
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("creating sshd's privilege separation directory: %w", err)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	if _, err := os.Stat(hostKey); err != nil {
		if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fluxd-test-sshd", "-f", hostKey).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %w: %s", err, out)
		}
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if f, err := os.OpenFile(authorized, os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
		return nil, err
	} else {
		f.Close()
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), User: "root"}
	config := fmt.Sprintf(`# Written by internal/sshserver: git over SSH on loopback, keys only.
Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
LogLevel VERBOSE
`, port, hostKey, authorized)
	if err := os.WriteFile(s.config(), []byte(config), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) config() string { return filepath.Join(s.Dir, "sshd_config") }

// Command is the path and arguments that run the server in the
// foreground, logging to stderr.
func (s *Server) Command() (string, []string) {
	return Sshd, []string{"-D", "-e", "-f", s.config()}
}

// KnownHostsFile is the known_hosts file Ready writes from ssh-keyscan.
func (s *Server) KnownHostsFile() string { return filepath.Join(s.Dir, "known_hosts") }

// Ready waits until the server answers, up to timeout, then writes its
// host key, as ssh-keyscan reads it, to KnownHostsFile.
func (s *Server) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, port, _ := net.SplitHostPort(s.Addr)
	var last error
	for {
		out, err := exec.CommandContext(ctx, "ssh-keyscan", "-T", "2", "-t", "ed25519", "-p", port, host).Output()
		if err == nil && len(strings.TrimSpace(string(out))) > 0 {
			return os.WriteFile(s.KnownHostsFile(), out, 0o644)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("sshd on %s did not answer ssh-keyscan: %v (%w)", s.Addr, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Authorize lets publicKey (authorized_keys form) log in, to run
// git-shell only: clone, fetch and push, nothing else.
func (s *Server) Authorize(publicKey string) error {
	line := `command="git-shell -c \"$SSH_ORIGINAL_COMMAND\"",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty ` + strings.TrimSpace(publicKey) + "\n"
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Revoke removes every authorized key.
func (s *Server) Revoke() error {
	return os.WriteFile(filepath.Join(s.Dir, "authorized_keys"), nil, 0o600)
}

// URL is the ssh:// URL of the repository at the absolute path repo.
func (s *Server) URL(repo string) string {
	return "ssh://" + s.User + "@" + s.Addr + repo
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
