package localstack

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
	"syscall"
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
	b, err := os.ReadFile(filepath.Join(dir, fluxdCmdline))
	if err != nil {
		return "", fmt.Errorf("the stack under %s has no recorded fluxd (start it with 'make up'): %w", dir, err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if pids, err := readPIDs(dir); err == nil && alive(pids["fluxd"]) {
		stopPID(pids["fluxd"], 30*time.Second)
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
	logf, err := os.OpenFile(filepath.Join(dir, "logs", "fluxd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting fluxd: %w", err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, "pids", "fluxd.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			_ = cmd.Process.Release()
			return addr, nil
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("fluxd exited (%v); the end of its log:\n%s", err, tail(filepath.Join(dir, "logs", "fluxd.log"), 15))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("fluxd did not accept connections on %s within a minute; see %s", addr, filepath.Join(dir, "logs", "fluxd.log"))
		}
	}
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
