package e2e

// The guide docs/workflow.md is run as written, so that it cannot go
// stale: every command in its ```sh blocks runs, in order, in one shell.
//
// The guide is written for the demo that 'make up' starts: its example
// services in namespace default, watched under deploy/ in git, and a
// fresh history. The shared stack of this test binary cannot be that demo:
// the other tests release, lock and automate helloworld, redis and worker
// there, in whatever order they run. So this test starts a second stack
// exactly as 'make up' does (localstack.Start, then a fluxd of instance
// "demo" on it), in a directory of its own on free ports, and runs the
// guide against it. That costs the stack's start (seconds) and keeps the
// guide free of anything a reader would not type.
//
// The shell has what '. .stack/env' gives a user: FLUX_URL, FLUX_TOKEN
// (admin, as in the demo), KUBECONFIG, REGISTRY, GIT_URL, GIT_BRANCH,
// GIT_PATH, and a PATH with fluxctl (built from this tree) and the stack's
// kubectl and crane first. USER is fixed, HOME and the working directory
// are scratch directories, and pipefail is on, so a failure in a pipe
// fails its line.
//
// Lines the test provides itself instead of running are listed in
// guideSetup, each with the reason; they must appear in the guide. Any
// other line runs and must exit 0, unless it ends in a comment
// '# fails: TEXT', when it must exit non-zero. Both '# fails: TEXT' and
// '# expect: TEXT' also require TEXT in the line's output (stdout and
// stderr together).

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

// guideSubstitute is a guide's line the test does not run as written:
// why, and what it runs instead (nothing when empty).
type guideSubstitute struct{ why, instead string }

// guideSetup are the workflow guide's lines the test does itself, and why.
var guideSetup = map[string]guideSubstitute{
	"make up":      {why: "the test starts a stack of its own as 'make up' does"},
	". .stack/env": {why: "the test's shell has the variables .stack/env sets"},
	"make down":    {why: "the test stops its stack when it ends"},
}

// guideStep is one command line of the guide.
type guideStep struct {
	line    int    // in the guide, 1-based
	command string // as the shell runs it (continuations joined)
	fails   bool   // must exit non-zero
	expect  string // must appear in the output, when not empty
	tested  string // the test its block's first line names ("# tested: TestX"), if any
}

var (
	guideMarker = regexp.MustCompile(`\s#\s*(expect|fails):\s*(.*?)\s*$`)
	// hereDoc finds a here-document's start (<<EOF, <<'EOF', <<-EOF),
	// not a here-string (<<<).
	hereDoc  = regexp.MustCompile(`(?:^|[^<])<<(-?)\s*['"]?([A-Za-z_]\w*)['"]?`)
	testedBy = regexp.MustCompile(`^#\s*tested:\s*(Test\w+)\s*$`)
)

// guideSteps reads the ```sh blocks of a Markdown file, in order; with a
// marker, only the blocks whose first line it is. A line of subs is not
// run: its substitute is, if it has one. A command continued with a
// backslash, or with a here-document (up to its closing word), is one
// step.
func guideSteps(path, marker string, subs map[string]guideSubstitute) (steps []guideStep, setup map[string]bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	setup = map[string]bool{}
	var (
		inBlock bool
		tested  string     // the block's "# tested: TestX"
		first   bool       // the block's first line is next
		skip    bool       // the block lacks the marker
		pending *guideStep // a command continued with a backslash
		heredoc string     // the word that ends the here-document being read
		dashed  bool       // it is a <<- one: the word may be indented
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case !inBlock && trimmed == "```sh":
			inBlock, first, skip = true, true, false
			continue
		case inBlock && trimmed == "```":
			if pending != nil {
				return nil, nil, fmt.Errorf("%s:%d: a block ends in a continued line", path, n)
			}
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		if first {
			first = false
			skip = marker != "" && trimmed != marker
			tested = ""
			if m := testedBy.FindStringSubmatch(trimmed); m != nil {
				tested = m[1]
			}
		}
		if skip {
			continue
		}
		if pending != nil {
			pending.command += "\n" + text
		} else {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			pending = &guideStep{line: n, command: text, tested: tested}
		}
		if heredoc != "" {
			if text != heredoc && !(dashed && strings.TrimLeft(text, "\t") == heredoc) {
				continue
			}
			heredoc = ""
		} else if m := hereDoc.FindStringSubmatch(text); m != nil {
			heredoc, dashed = m[2], m[1] == "-"
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			continue
		}
		s := *pending
		pending = nil
		if m := guideMarker.FindStringSubmatch(text); m != nil {
			s.fails, s.expect = m[1] == "fails", m[2]
		}
		cmd := strings.TrimSpace(strings.SplitN(s.command, " #", 2)[0])
		if sub, ok := subs[cmd]; ok {
			setup[cmd] = true
			if sub.instead != "" {
				steps = append(steps, guideStep{line: s.line, command: sub.instead})
			}
			continue
		}
		steps = append(steps, s)
	}
	if inBlock {
		return nil, nil, fmt.Errorf("%s: a ```sh block is not closed", path)
	}
	return steps, setup, sc.Err()
}

func TestWorkflowGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	steps, setup, err := guideSteps(filepath.Join(root, "docs", "workflow.md"), "", guideSetup)
	if err != nil {
		t.Fatal(err)
	}
	for line, sub := range guideSetup {
		if !setup[line] && line != "make down" {
			t.Errorf("the guide lacks %q (%s)", line, sub.why)
		}
	}
	if len(steps) < 20 {
		t.Fatalf("the guide has %d commands in ```sh blocks; the parser or the guide is wrong", len(steps))
	}

	env := startDemo(t)
	runGuide(t, "workflow.md", steps, newGuideShell(t, env))
}

// guideHooks adapt a guide's lines to the stack a test runs them on.
type guideHooks struct {
	// before may rewrite a line's command, or say not to run it.
	before func(s *guideStep) (run bool)
	// after runs once a line has passed its checks, with its output.
	after func(i int, s guideStep, out string)
	// timeout bounds each line; 3 minutes when zero.
	timeout time.Duration
}

// runGuide runs a guide's steps in sh, each as the guide says it ends.
func runGuide(t *testing.T, name string, steps []guideStep, sh *guideShell) {
	t.Helper()
	runGuideWith(t, name, steps, sh, nil)
}

// runGuideWith is runGuide with hooks, which may be nil.
func runGuideWith(t *testing.T, name string, steps []guideStep, sh *guideShell, hooks *guideHooks) {
	t.Helper()
	if hooks == nil {
		hooks = &guideHooks{}
	}
	timeout := cmp.Or(hooks.timeout, 3*time.Minute)
	for i, s := range steps {
		if hooks.before != nil && !hooks.before(&s) {
			continue
		}
		start := time.Now()
		out, code, err := sh.run(i, s.command, timeout)
		took := time.Since(start).Round(10 * time.Millisecond)
		if err != nil {
			t.Fatalf("%s:%d: %s\n%v\noutput so far:\n%s", name, s.line, s.command, err, out)
		}
		t.Logf("%s:%d ($ %s) exit %d in %v\n%s", name, s.line, s.command, code, took, indent(out))
		switch {
		case s.fails && code == 0:
			t.Fatalf("%s:%d: %q exited 0; the guide says it fails", name, s.line, s.command)
		case !s.fails && code != 0:
			t.Fatalf("%s:%d: %q exited %d:\n%s", name, s.line, s.command, code, out)
		case s.expect != "" && !strings.Contains(out, s.expect):
			t.Fatalf("%s:%d: the output of %q lacks %q:\n%s", name, s.line, s.command, s.expect, out)
		}
		if hooks.after != nil {
			hooks.after(i, s, out)
		}
	}
}

// startDemo starts a stack of its own and a fluxd on it as 'make up'
// does, and returns the environment '. .stack/env' would give. Both stop
// when the test ends; their directory is kept if the test failed (or with
// FLUXD_STACK_KEEP=1), and its logs are searched for the tokens.
func startDemo(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	st := startGuideStack(t)
	f, err := st.StartFluxd(ctx, filepath.Join(binDir, "fluxd"), "demo", "--log-format=text")
	if err != nil {
		t.Fatalf("starting the guide's fluxd: %v (log: %s)", err, st.Log("fluxd"))
	}
	t.Logf("the guide's stack and fluxd up in %v (%s)", time.Since(start).Round(time.Millisecond), st.Dir)
	return []string{
		"FLUX_URL=" + f.Addr,
		"FLUX_TOKEN=" + f.Tokens["admin"],
		"FLUX_VIEWER_TOKEN=" + f.Tokens["viewer"],
		"FLUX_DEPLOYER_TOKEN=" + f.Tokens["deployer"],
		"KUBECONFIG=" + st.Kubeconfig,
		"REGISTRY=" + st.Registry,
		"GIT_URL=" + st.GitURL,
		"GIT_BRANCH=" + st.GitBranch,
		"GIT_PATH=" + st.GitPath,
		"PATH=" + binDir + ":" + stackBinDir(t) + ":" + os.Getenv("PATH"),
	}
}

// startGuideStack starts a stack of its own for a guide, as 'make up'
// does, stopped when the test ends.
func startGuideStack(t *testing.T) *localstack.Stack {
	t.Helper()
	return startGuideStackWith(t, localstack.Options{})
}

// startGuideStackWith is startGuideStack with options (Dir and BinDir are
// the test's).
func startGuideStackWith(t *testing.T, opts localstack.Options) *localstack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "fluxd-guide-stack-")
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir, opts.BinDir = dir, stackBinDir(t)
	st, err := localstack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the guide's stack: %v (logs in %s)", err, dir)
	}
	t.Cleanup(func() {
		st.Stop()
		if leaks, err := localstack.LeakedSecrets(dir); err != nil || len(leaks) > 0 {
			t.Errorf("searching the guide stack's logs for secrets: %v %q", err, leaks)
		}
		if t.Failed() || os.Getenv("FLUXD_STACK_KEEP") != "" {
			t.Logf("the guide's stack and its logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return st
}

// guideShell is one bash process that runs the guide's lines one at a
// time, so that variables and the working directory carry from one line
// to the next as they do in a reader's terminal. Each line's output goes
// to a file of its own and its exit code comes back on a pipe.
type guideShell struct {
	cmd   *exec.Cmd
	stdin *os.File // the script, fed a line at a time
	codes *bufio.Reader
	dir   string // the lines' output files
	work  string // the working directory
}

func newGuideShell(t *testing.T, env []string) *guideShell {
	t.Helper()
	home, work, outDir := t.TempDir(), t.TempDir(), t.TempDir()
	scriptR, scriptW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	codeR, codeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-s")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "USER=alex", "TERM=dumb",
		"FLUX_TIMEOUT=", "FLUX_CA_FILE=", "FLUX_CERT_FILE=", "FLUX_KEY_FILE=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = scriptR
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // only the shell's own complaints
	cmd.ExtraFiles = []*os.File{codeW}            // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scriptR.Close()
	codeW.Close()
	sh := &guideShell{cmd: cmd, stdin: scriptW, codes: bufio.NewReader(codeR), dir: outDir, work: work}
	t.Cleanup(func() {
		scriptW.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		codeR.Close()
	})
	if _, err := fmt.Fprintln(scriptW, "set -o pipefail"); err != nil {
		t.Fatal(err)
	}
	return sh
}

// outFile is where step i's output goes (a command left running in the
// background keeps writing there).
func (sh *guideShell) outFile(i int) string { return filepath.Join(sh.dir, strconv.Itoa(i)+".out") }

// run runs step i's command and returns its output and exit code.
func (sh *guideShell) run(i int, command string, timeout time.Duration) (string, int, error) {
	out := sh.outFile(i)
	// A group, not a subshell: assignments and cd last. Its stdin is not
	// the script's.
	script := fmt.Sprintf("{\n%s\n} >%q 2>&1 </dev/null; echo $? >&3\n", command, out)
	if _, err := sh.stdin.WriteString(script); err != nil {
		return "", 0, fmt.Errorf("writing to the shell: %w", err)
	}
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := sh.codes.ReadString('\n')
		done <- result{l, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		r = <-done
		b, _ := os.ReadFile(out)
		return string(b), 0, fmt.Errorf("no end after %v", timeout)
	}
	b, _ := os.ReadFile(out)
	if r.err != nil {
		return string(b), 0, fmt.Errorf("the shell exited: %v", r.err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(r.line))
	return string(b), code, err
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// The parser finds commands only in ```sh blocks, joins continued lines,
// reads the markers and sets the setup lines apart.
func TestGuideStepsParsesBlocks(t *testing.T) {
	guide := "# Title\n\n```sh\nmake up\n. .stack/env\n```\n\nText `not run`.\n\n```yaml\nkey: value\n```\n\n" +
		"```sh\n# a comment\nfluxctl version   # expect: instance: demo\n\nfluxctl release --service a \\\n  -y   # fails: locked\nx=$(echo 1) # just a comment\n```\n"
	steps, setup, err := guideSteps(writeTemp(t, guide), "", guideSetup)
	if err != nil {
		t.Fatal(err)
	}
	want := []guideStep{
		{line: 16, command: "fluxctl version   # expect: instance: demo", expect: "instance: demo"},
		{line: 18, command: "fluxctl release --service a \\\n  -y   # fails: locked", fails: true, expect: "locked"},
		{line: 20, command: "x=$(echo 1) # just a comment"},
	}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("steps:\n got %+v\nwant %+v", steps, want)
	}
	if !setup["make up"] || !setup[". .stack/env"] || len(setup) != 2 {
		t.Errorf("setup lines: %v", setup)
	}
	// With a marker, only the blocks it begins run; a substitute runs in
	// place of its line.
	marked := "```sh\n# tested\nkubectl apply -f x.yaml\nssh-keyscan h > k\n```\n\n```sh\nkubectl port-forward deploy/fluxd 3030 &\n```\n"
	steps, setup, err = guideSteps(writeTemp(t, marked), "# tested", map[string]guideSubstitute{"ssh-keyscan h > k": {why: "no host h", instead: "touch k"}})
	if err != nil {
		t.Fatal(err)
	}
	want = []guideStep{{line: 3, command: "kubectl apply -f x.yaml"}, {line: 4, command: "touch k"}}
	if fmt.Sprint(steps) != fmt.Sprint(want) || !setup["ssh-keyscan h > k"] {
		t.Errorf("marked steps:\n got %+v\nwant %+v (setup %v)", steps, want, setup)
	}
	// A block whose first line names a test keeps that name on its lines.
	steps, _, err = guideSteps(writeTemp(t, "```sh\n# tested: TestOther\nhelm version\n```\n\n```sh\nkubectl version\n```\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want = []guideStep{{line: 3, command: "helm version", tested: "TestOther"}, {line: 7, command: "kubectl version"}}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("steps of a block naming its test:\n got %+v\nwant %+v", steps, want)
	}
	// A here-document is part of its command, up to its closing word; a
	// here-string is not one.
	steps, _, err = guideSteps(writeTemp(t, "```sh\ncat > f <<'EOF'\na: 1\n# not a comment\n\nEOF\ncat f   # expect: a: 1\ntr a b <<< a\n```\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want = []guideStep{{line: 2, command: "cat > f <<'EOF'\na: 1\n# not a comment\n\nEOF"}, {line: 7, command: "cat f   # expect: a: 1", expect: "a: 1"}, {line: 8, command: "tr a b <<< a"}}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("steps with a here-document:\n got %+v\nwant %+v", steps, want)
	}
	if _, _, err := guideSteps(writeTemp(t, "```sh\ncat <<EOF\nx\n```\n"), "", nil); err == nil {
		t.Error("a here-document left open at the block's end is not reported")
	}
	if _, _, err := guideSteps(writeTemp(t, "```sh\nfluxctl version\n"), "", guideSetup); err == nil {
		t.Error("an unclosed block is not reported")
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
