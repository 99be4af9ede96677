package localstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
)

// Fluxd is a fluxd process the stack started.
type Fluxd struct {
	// Addr is the host:port of its gRPC API.
	Addr string
	// Tokens maps a role name to a token of the instance the stack made.
	Tokens map[string]string
	// TokensFile is the tokens file fluxd reads.
	TokensFile string
	// PID is its process ID, for reading /proc (its RSS, its CPU). Signal
	// it with Signal or Stop, never by this number: once it has exited
	// the number may be another process's.
	PID int

	proc *process
}

// Signal sends sig to this fluxd. Once it has exited it signals nothing and
// returns os.ErrProcessDone: it goes through the process handle (a pidfd),
// never by PID, which by then may be another process's (process.stop).
func (f *Fluxd) Signal(sig syscall.Signal) error {
	if f.proc == nil {
		return errors.New("localstack: this fluxd was not started by the stack")
	}
	return f.proc.cmd.Process.Signal(sig)
}

// Exited reports whether this fluxd has exited.
func (f *Fluxd) Exited() bool {
	if f.proc == nil {
		return true
	}
	select {
	case <-f.proc.exited:
		return true
	default:
		return false
	}
}

// Stop sends sig to this fluxd, if it still runs, and waits up to wait for
// it to exit; it reports whether it has.
func (f *Fluxd) Stop(sig syscall.Signal, wait time.Duration) bool {
	_ = f.Signal(sig)
	return f.Wait(wait)
}

// Wait waits up to wait for this fluxd to exit; it reports whether it has.
func (f *Fluxd) Wait(wait time.Duration) bool {
	if f.proc == nil {
		return true
	}
	select {
	case <-f.proc.exited:
		return true
	case <-time.After(wait):
		return false
	}
}

// StartFluxd starts the fluxd binary at path against the stack, with a
// fresh tokens file holding one token per role for instance, and waits
// until its API accepts connections. extra flags are appended.
func (s *Stack) StartFluxd(ctx context.Context, path, instance string, extra ...string) (*Fluxd, error) {
	return s.StartNamedFluxd(ctx, "fluxd", path, instance, nil, extra...)
}

// StartNamedFluxd is StartFluxd for another fluxd beside the first: its
// name keys its log, PID file, state directory and tokens file. With
// tokens from an earlier start of the same name (a restart), it keeps
// them instead of making new ones.
func (s *Stack) StartNamedFluxd(ctx context.Context, name, path, instance string, tokens map[string]string, extra ...string) (*Fluxd, error) {
	f := &Fluxd{Tokens: map[string]string{}, TokensFile: filepath.Join(s.Dir, name+"-tokens")}
	defer func() {
		for role, tok := range f.Tokens {
			NoteSecret("the "+role+" token of "+name, tok)
		}
	}()
	if tokens != nil {
		f.Tokens = tokens
	} else {
		_ = os.Remove(f.TokensFile)
		for _, role := range []auth.Role{auth.Admin, auth.Deployer, auth.Viewer} {
			tok, err := auth.Create(f.TokensFile, auth.Identity{Instance: instance, Role: role})
			if err != nil {
				return nil, err
			}
			f.Tokens[role.String()] = tok
		}
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	f.Addr = addr
	args := []string{
		"--listen=" + addr,
		"--tokens-file=" + f.TokensFile,
		"--kubeconfig=" + s.Kubeconfig,
		"--state-dir=" + filepath.Join(s.Dir, name),
		"--git-url=" + s.GitURL,
		"--git-branch=" + s.GitBranch,
		"--git-user=fluxd",
		"--git-email=fluxd@stack.invalid",
	}
	// --git-path adds to a list: the stack's own only when extra names
	// none.
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--git-path") }) {
		args = append(args, "--git-path="+s.GitPath)
	}
	db, err := s.dbFlags(ctx, name, extra)
	if err != nil {
		return nil, err
	}
	args = append(append(args, db...), extra...)
	p, err := s.spawn(name, path, args...)
	if err != nil {
		return nil, err
	}
	f.PID, f.proc = p.cmd.Process.Pid, p
	err = waitFor(ctx, p, 60*time.Second, "fluxd accepting connections", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// BuildBinaries builds fluxd and fluxctl from this module into dir.
func BuildBinaries(ctx context.Context, moduleRoot, dir string) error {
	for _, name := range []string{"fluxd", "fluxctl"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
	}
	return nil
}
