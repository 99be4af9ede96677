package localstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The demo's fluxd can be stopped (SIGTERM, SIGKILL) and started again on
// its state, as an operator restarts it, to see a job taken over: 'make
// up' records its command line, and RestartFluxd runs it again.

const fluxdCmdline = "fluxd.cmdline"

// RecordFluxd saves the command line of the fluxd process pid of a stack
// under dir, for RestartFluxd.
func RecordFluxd(dir string, pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fluxdCmdline), b, 0o600)
}

// RestartFluxd stops the fluxd of a stack under dir if it runs (SIGTERM,
// as Kubernetes does, then SIGKILL after 30 s) and starts it again with
// the same command line, so the same address, tokens and state, detached
// like the rest of the stack. It returns the API address.
func RestartFluxd(ctx context.Context, dir string) (string, error) {
	return RestartFluxdWith(ctx, dir, nil)
}

// RestartFluxdWith is RestartFluxd with flags added to the recorded
// command line ("--name=value"; one of the same name replaces the
// recorded one), which is recorded in turn: a later restart keeps them.
// 'make restart-fluxd ARGS=--verify-config=...' restarts the demo's
// fluxd with a flag 'make up' does not give it.
func RestartFluxdWith(ctx context.Context, dir string, extra []string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, fluxdCmdline))
	if err != nil {
		return "", fmt.Errorf("the stack under %s has no recorded fluxd (start it with 'make up'): %w", dir, err)
	}
	args, err := withFlags(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), extra)
	if err != nil {
		return "", err
	}
	if len(extra) > 0 {
		if err := os.WriteFile(filepath.Join(dir, fluxdCmdline), []byte(strings.Join(args, "\x00")+"\x00"), 0o600); err != nil {
			return "", err
		}
	}
	if pid, ok := RecordedPID(dir, "fluxd"); ok {
		stopPID(pid, 30*time.Second)
	}
	var addr string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			addr = v
		}
	}
	if addr == "" {
		return "", errors.New("the recorded fluxd command line has no --listen")
	}
	// Spawned as 'make up' spawns it: detached, logging and recording its
	// PID under dir.
	st := &Stack{Dir: dir, detach: true}
	p, err := st.spawn("fluxd", args[0], args[1:]...)
	if err != nil {
		return "", err
	}
	err = waitFor(ctx, p, 60*time.Second, "fluxd accepting connections", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return "", err
	}
	return addr, nil
}

// withFlags is the command line args with extra's flags ("--name=value")
// added, each replacing the flags of its name in args.
func withFlags(args, extra []string) ([]string, error) {
	args = slices.Clone(args)
	for _, e := range extra {
		flagName, _, ok := strings.Cut(e, "=")
		if !strings.HasPrefix(flagName, "--") || len(flagName) == 2 || !ok {
			return nil, fmt.Errorf("%q: give each flag as --name=value", e)
		}
		args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, flagName+"=") })
		args = append(args, e)
	}
	return args, nil
}

// OnlyFluxdDown reports whether every component of the stack under dir
// runs but fluxd.
func OnlyFluxdDown(dir string) bool {
	missing, err := NotRunning(dir)
	if err != nil || len(missing) != 1 || missing[0] != "fluxd" {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, fluxdCmdline))
	return err == nil
}
