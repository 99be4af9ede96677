package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ModuleRoot finds the root of the fluxd module from the working
// directory, by looking upwards for stack/build.sh.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "stack", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the fluxd module root (no stack/build.sh above the working directory)")
		}
		dir = parent
	}
}

// BinDir returns the directory of the stack's binaries: $FLUXD_STACK_BIN
// when set, else what stack/build.sh prints (building them if needed).
func BinDir(ctx context.Context) (string, error) {
	if d := os.Getenv("FLUXD_STACK_BIN"); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "stack", "build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("stack/build.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RunTests starts one stack for a test binary, in a temporary directory on
// free ports, stores it in *st, runs the tests and stops the stack. Use it
// from TestMain: os.Exit(localstack.RunTests(m, &stack)).
//
// With FLUXD_STACK_KEEP=1 the state directory (logs included) is kept.
func RunTests(m *testing.M, st **Stack) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := BinDir(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "fluxd-stack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		return 1
	}
	start := time.Now()
	// FLUXD_STACK_DB=postgres runs every fluxd of the tests on PostgreSQL.
	// FLUXD_STACK_CONTROLLER_QPS raises kube-controller-manager's API rate
	// (make bench-fleet); unset, it keeps its default.
	qps := 0
	if v := os.Getenv("FLUXD_STACK_CONTROLLER_QPS"); v != "" {
		if qps, err = strconv.Atoi(v); err != nil || qps < 1 {
			fmt.Fprintf(os.Stderr, "localstack: FLUXD_STACK_CONTROLLER_QPS=%q: a number of requests a second, 1 or more (200)\n", v)
			return 1
		}
	}
	s, err := Start(ctx, Options{Dir: dir, BinDir: bin, Log: os.Stderr, DB: os.Getenv("FLUXD_STACK_DB"), RealNode: RealNodeWanted(), ControllerQPS: qps})
	if err != nil {
		fmt.Fprintln(os.Stderr, "localstack:", err)
		fmt.Fprintln(os.Stderr, "localstack: logs kept in", dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "localstack: stack up in %v (%s)\n", time.Since(start).Round(time.Millisecond), dir)
	if s.opts.DB == "postgres" {
		fmt.Fprintln(os.Stderr, "localstack: every fluxd keeps its records in PostgreSQL (FLUXD_STACK_DB=postgres)")
	}
	*st = s
	code := m.Run()
	s.Stop()
	leaks, err := LeakedSecrets(dir)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "localstack: searching the logs for secrets:", err)
		code = 1
	case len(leaks) > 0:
		fmt.Fprintf(os.Stderr, "localstack: secrets leaked into the logs:\n  %s\n", strings.Join(leaks, "\n  "))
		code = 1
	default:
		fmt.Fprintf(os.Stderr, "localstack: the logs hold none of the %d secrets the tests used\n", SecretsNoted())
	}
	if os.Getenv("FLUXD_STACK_KEEP") == "" && code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "localstack: state and logs kept in", dir)
	}
	return code
}
