package e2e

// The signing guide, docs/security.md's "Requiring signatures for one
// repository", then its "On the local demo" steps for attestations and
// keyless signatures (hack/sign's test CA), is run as written, as the
// promotion guide is: every line
// of its ```sh blocks marked "# tested: TestSigningGuide", in order, in
// one shell, on a stack of its own with fluxd started as
// 'FLUXD_STACK_REAL_NODE=0 make up' starts it (a process, the demo's
// flags).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

// signingGuideSetup are the signing guide's lines the test does itself,
// and why.
var signingGuideSetup = map[string]guideSubstitute{
	"FLUXD_STACK_REAL_NODE=0 make up": {why: "the test starts a stack of its own as 'make up' does without the real node"},
	". .stack/env":                    {why: "the test's shell has the variables .stack/env sets"},
}

const signingGuideMarker = "# tested: TestSigningGuide"

func TestSigningGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	steps, setup, err := guideSteps(filepath.Join(root, "docs", "security.md"), signingGuideMarker, signingGuideSetup)
	if err != nil {
		t.Fatal(err)
	}
	for line, sub := range signingGuideSetup {
		if !setup[line] {
			t.Errorf("the guide lacks %q (%s)", line, sub.why)
		}
	}
	if len(steps) < 15 {
		t.Fatalf("the guide has %d commands in ```sh blocks marked %q; the parser or the guide is wrong", len(steps), signingGuideMarker)
	}
	// 'go run ./hack/sign' runs from the repository's root; the test's
	// shell works in a directory of its own, so it runs the same command
	// built.
	signBin := filepath.Join(t.TempDir(), "sign")
	build := exec.Command("go", "build", "-o", signBin, "./hack/sign")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/sign: %v\n%s", err, out)
	}

	st, env := startSigningDemo(t)
	sh := newGuideShell(t, env)
	// 'make up' makes .stack/, where the guide keeps its keys.
	if err := os.Mkdir(filepath.Join(sh.work, ".stack"), 0o700); err != nil {
		t.Fatal(err)
	}
	restarted := false
	hooks := &guideHooks{timeout: 3 * time.Minute, before: func(s *guideStep) bool {
		s.command = strings.ReplaceAll(s.command, "go run ./hack/sign", signBin)
		args, ok := strings.CutPrefix(s.command, "make restart-fluxd ARGS=")
		if !ok {
			return true
		}
		// 'make restart-fluxd ARGS=...' is hack/stack's restart of the
		// demo's fluxd with those flags added: the same call, on the
		// test's stack, with the shell's $PWD.
		args = strings.ReplaceAll(strings.Trim(strings.SplitN(args, " #", 2)[0], `"' `), "$PWD", sh.work)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := localstack.RestartFluxdWith(ctx, st.Dir, strings.Fields(args)); err != nil {
			t.Fatalf("%s: %v (log: %s)", s.command, err, st.Log("fluxd"))
		}
		restarted = true
		return false
	}}
	runGuideWith(t, "security.md", steps, sh, hooks)
	if !restarted {
		t.Errorf("the guide never ran 'make restart-fluxd ARGS=...': fluxd never had --verify-config")
	}
}

// startSigningDemo starts a stack of its own and a fluxd on it as
// 'FLUXD_STACK_REAL_NODE=0 make up' does (hack/stack: the same flags, its
// command line recorded for a restart), and returns the stack and the
// environment '. .stack/env' would give.
func startSigningDemo(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	st := startGuideStack(t)
	var addrs [3]string
	for i := range addrs {
		a, err := localstack.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	metrics, webhook, web := addrs[0], addrs[1], addrs[2]
	secret := "signing-guide-webhook-secret-0123456789"
	localstack.NoteSecret("the signing guide's webhook secret", secret)
	secretFile := filepath.Join(st.Dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := st.StartFluxd(ctx, filepath.Join(binDir, "fluxd"), "demo", "--log-format=text", "--metrics-listen="+metrics,
		"--webhook-listen="+webhook, "--webhook-secret-file="+secretFile, "--web-listen="+web, "--sync-interval=1m")
	if err != nil {
		t.Fatalf("starting the guide's fluxd: %v (log: %s)", err, st.Log("fluxd"))
	}
	if err := localstack.RecordFluxd(st.Dir, f.PID); err != nil {
		t.Fatal(err)
	}
	// A restarted fluxd is detached, as the demo's is: the stack's Stop
	// does not know it.
	t.Cleanup(func() { stopRecordedFluxd(t, st.Dir, f.PID) })
	t.Logf("the guide's stack and fluxd up in %v (%s)", time.Since(start).Round(time.Millisecond), st.Dir)
	return st, []string{
		"FLUX_URL=" + f.Addr,
		"FLUX_TOKEN=" + f.Tokens["admin"],
		"FLUX_VIEWER_TOKEN=" + f.Tokens["viewer"],
		"FLUX_DEPLOYER_TOKEN=" + f.Tokens["deployer"],
		"FLUX_METRICS_URL=http://" + metrics + "/metrics",
		"FLUX_WEBHOOK_URL=http://" + webhook + "/v1/notify",
		"FLUX_WEBHOOK_SECRET=" + secret,
		"FLUX_WEB_URL=http://" + web,
		"KUBECONFIG=" + st.Kubeconfig,
		"REGISTRY=" + st.Registry,
		"GIT_URL=" + st.GitURL,
		"GIT_BRANCH=" + st.GitBranch,
		"GIT_PATH=" + st.GitPath,
		"PATH=" + binDir + ":" + stackBinDir(t) + ":" + os.Getenv("PATH"),
	}
}

// stopRecordedFluxd stops the fluxd a restart left under dir (not first,
// the one the stack started and stops), with SIGTERM, then SIGKILL.
func stopRecordedFluxd(t *testing.T, dir string, first int) {
	pid, ok := localstack.RecordedPID(dir, "fluxd")
	if !ok || pid == first || pid <= 1 {
		return
	}
	// A PID from a file: signalled only while it is still the recorded
	// fluxd, as the number may be another process's once it has exited.
	isFluxd := func() bool {
		p, ok := localstack.RecordedPID(dir, "fluxd")
		return ok && p == pid
	}
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for range 300 {
		if !isFluxd() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the restarted fluxd (pid %d) did not stop within 30s of SIGTERM: killed", pid)
	if isFluxd() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
