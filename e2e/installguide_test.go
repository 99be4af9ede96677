package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/internal/localstack"
)

// docs/install.md runs end to end: every ```sh block, in order, in one
// shell, on a stack of its own with the real node, as a user runs it on
// a cluster. The guide's example names are the stack's, the rendered
// install is adapted to the stack before each apply, and the keys the
// reader adds to the git host are authorized on the stack's sshd (the
// replacements and hooks below). The few lines that cannot run are installSkips, each
// with its reason; the list must stay small, and every entry, like every
// replacement, must still match a line of the guide.
//
// The guide is read whole, whatever its sections, so a section added
// later runs too; a block whose first line is "# tested: TestX" is TestX's
// to run (with its own setup: the Helm section's TestHelmGuide builds
// helm and runs from a checkout), and TestX must exist.

// installReplacement is a text of the guide's commands the test replaces
// wherever it appears: an example name that is the stack's on the stack.
type installReplacement struct {
	old string
	new func() string // evaluated when the line runs
	why string
}

// installSkips are the guide's lines that are not run, by the start of
// their command, and why.
var installSkips = []struct{ prefix, why string }{
	{"kubectl -n fluxd create secret generic fluxd-git", "the HTTPS alternative to SSH: this install is the SSH one (TestFluxctlInstallIsAccepted renders the HTTPS Secret)"},
	{"curl -sS -o /dev/null -w '%{http_code}\\n'", "its Docker Hub payload names docker.io/org/app, which no service on the stack runs, and fluxd answers 400 for a repository no watched service runs; TestWebhookBurstReleasesTheLastPush posts to the listener"},
	{"FLUX_URL=https://fluxd.example.com:3030", "needs a certificate for the reader's host name; TestFluxctlOverTLS tests fluxctl over TLS"},
}

// maxInstallSkips keeps the lines that run nowhere few.
const maxInstallSkips = 3

func TestInstallGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	if !localstack.RealNodeWanted() {
		t.Skip("the install guide runs fluxd in a pod: it needs the real node (FLUXD_STACK_REAL_NODE=0)")
	}
	if len(installSkips) > maxInstallSkips {
		t.Fatalf("%d of the guide's lines are not run; at most %d may be", len(installSkips), maxInstallSkips)
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	steps, _, err := guideSteps(filepath.Join(root, "docs", "install.md"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 30 {
		t.Fatalf("the guide has %d commands in ```sh blocks; the parser or the guide is wrong", len(steps))
	}
	st := startGuideStackWith(t, localstack.Options{RealNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	gs, err := st.StartGitSSH(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, sshPort, _ := strings.Cut(gs.Addr, ":")
	localPort, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, local, _ := strings.Cut(localPort, ":")

	var pod *localstack.FluxdPod // the install as adapted to the stack
	grpcPort := func() string {
		if pod == nil {
			t.Fatal("a port-forward to the pod before the install was applied")
		}
		_, p, _ := strings.Cut(pod.Addr, ":")
		return p
	}
	replacements := []installReplacement{
		{"make image", func() string { return "make -s -C '" + root + "' image" }, "the image is built from this checkout"},
		{"registry.example.com", func() string { return st.Registry }, "the stack's registry"},
		{"git@git.example.com:org/manifests.git", func() string { return gs.GitURL }, "the stack's sshd serves its manifests"},
		{"ssh-keyscan git.example.com", func() string { return "ssh-keyscan -p " + sshPort + " 127.0.0.1" }, "the stack's sshd is the git host"},
		{"default:deployment/web", func() string { return "default:deployment/helloworld" }, "a workload of the stack's"},
		{"FLUX_TOKEN=...", func() string { return `FLUX_TOKEN="$FLUX_ADMIN_TOKEN"` }, "the admin token step 3 printed"},
		// fluxd's pod uses the host's network on ports of its own
		// (realnode.md), and 3030 may be taken on this machine.
		{"deploy/fluxd 3030:3030", func() string { return "deploy/fluxd " + local + ":" + grpcPort() }, "the pod's API port on the stack"},
		{"svc/fluxd 3030:3030", func() string { return "svc/fluxd " + local + ":3030" }, "a free local port"},
		{"localhost:3030", func() string { return "localhost:" + local }, "a free local port"},
	}
	used, delegated := map[string]bool{}, map[string]bool{}
	// The reader's Go caches: make image builds from them, not from an
	// empty module cache under the shell's scratch HOME.
	goEnv, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	caches := strings.Fields(string(goEnv))
	if len(caches) != 2 {
		t.Fatalf("go env GOMODCACHE GOCACHE: %q", goEnv)
	}
	sh := newGuideShell(t, []string{
		"KUBECONFIG=" + st.Kubeconfig,
		"PATH=" + binDir + ":" + stackBinDir(t) + ":" + os.Getenv("PATH"),
		"GOMODCACHE=" + caches[0], "GOCACHE=" + caches[1],
		// The pod asks for 100m of CPU, which is little beside three
		// test shards on 2 cores: a lock pushed over OpenSSH took 21 s
		// there, and the unlock after it 34 s, past fluxctl's 30 s
		// default (CI). A reader's cluster is not that loaded; the
		// guide's commands are run as written, with more patience.
		"FLUX_TIMEOUT=3m",
	})
	hooks := &guideHooks{timeout: 6 * time.Minute}
	hooks.before = func(s *guideStep) bool {
		if strings.TrimSpace(strings.SplitN(s.command, " #", 2)[0]) == "kubectl apply -f fluxd.yaml" {
			// The stack has no kube-proxy, and its API server and sshd
			// listen on loopback: fluxd's pod uses the host's network on
			// the real node, as make up's does (realnode.md). The
			// rendered file is adapted before each apply.
			path := filepath.Join(sh.work, "fluxd.yaml")
			rendered, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			adapted, fp, err := st.AdaptFluxdManifests(rendered, "fluxd")
			if err != nil {
				t.Fatalf("install.md:%d: adapting the install to the stack: %v", s.line, err)
			}
			if err := os.WriteFile(path, adapted, 0o644); err != nil {
				t.Fatal(err)
			}
			pod = fp
		}
		if s.tested != "" && s.tested != "TestInstallGuide" {
			// A block another test owns (its first line says which) runs
			// there, with that test's setup.
			delegated[s.tested] = true
			t.Logf("install.md:%d run by %s: %s", s.line, s.tested, s.command)
			return false
		}
		for _, sk := range installSkips {
			if strings.HasPrefix(s.command, sk.prefix) {
				used[sk.prefix] = true
				t.Logf("install.md:%d not run (%s): %s", s.line, sk.why, s.command)
				return false
			}
		}
		for _, r := range replacements {
			if strings.Contains(s.command, r.old) {
				used[r.old] = true
				s.command = strings.ReplaceAll(s.command, r.old, r.new())
				s.expect = strings.ReplaceAll(s.expect, r.old, r.new())
			}
		}
		return true
	}
	hooks.after = func(i int, s guideStep, out string) {
		cmd := strings.TrimSpace(strings.SplitN(s.command, " #", 2)[0])
		switch {
		case strings.HasPrefix(cmd, "fluxd token create") && strings.Contains(cmd, "--role admin"):
			lines := strings.Fields(out)
			if len(lines) == 0 {
				t.Fatalf("install.md:%d printed no token", s.line)
			}
			localstack.NoteSecret("the install guide's admin token", lines[len(lines)-1])
			// In the shell, as the reader keeps it; not in the test's log.
			if _, _, err := sh.run(i+10000, "FLUX_ADMIN_TOKEN="+lines[len(lines)-1], time.Minute); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(cmd, "port-forward") && strings.HasSuffix(cmd, "&"):
			waitPortForward(t, sh, i, s)
			// A reader's next command comes a moment later; the test's
			// at once: it waits until fluxd listens in the pod (whose
			// network is the host's), or the forwarded connection is
			// closed unanswered.
			if err := poll(ctx, 2*time.Minute, func() error {
				c, err := net.DialTimeout("tcp", pod.Addr, time.Second)
				if err != nil {
					return err
				}
				return c.Close()
			}); err != nil {
				t.Fatalf("install.md:%d: fluxd's pod does not listen on %s: %v", s.line, pod.Addr, err)
			}
		case strings.Contains(cmd, "fluxctl identity"):
			// The reader adds the key to the git host.
			if !strings.HasPrefix(strings.TrimSpace(out), "ssh-ed25519 ") {
				t.Fatalf("install.md:%d: fluxctl identity printed %q", s.line, out)
			}
			if err := gs.Authorize(strings.TrimSpace(out)); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(cmd, "patch secret fluxd-ssh"):
			// A key of the reader's own is added to the git host too:
			// the next fluxd pod (step 9) uses it.
			pub, err := os.ReadFile(filepath.Join(sh.work, "identity.pub"))
			if err != nil {
				t.Fatal(err)
			}
			if err := gs.Authorize(string(pub)); err != nil {
				t.Fatal(err)
			}
		}
	}
	runGuideWith(t, "install.md", steps, sh, hooks)

	for name := range delegated {
		if !testExists(t, name) {
			t.Errorf("install.md names %s as the test of some of its blocks, but no such test is in e2e/", name)
		}
	}

	for _, sk := range installSkips {
		if !used[sk.prefix] {
			t.Errorf("no line of the guide begins %q: remove it from installSkips", sk.prefix)
		}
	}
	for _, r := range replacements {
		if !used[r.old] {
			t.Errorf("no line of the guide has %q (%s): remove the replacement", r.old, r.why)
		}
	}
	// What the reader ends with: fluxd upgraded to v1.2.4, Ready, on the
	// real node, from the image make image pushed.
	d, err := kubeClientOf(t, st).AppsV1().Deployments("fluxd").Get(ctx, "fluxd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != st.Registry+"/fluxd:v1.2.4" || d.Status.ReadyReplicas != 1 {
		t.Errorf("after the guide, fluxd runs %s with %d ready replicas; want %s/fluxd:v1.2.4 Ready", img, d.Status.ReadyReplicas, st.Registry)
	}
}

// waitPortForward waits until a port-forward the guide left running in
// the background forwards. One that failed because the pod was not
// running yet is run again, as a reader would, for up to two minutes.
func waitPortForward(t *testing.T, sh *guideShell, i int, s guideStep) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for n := 0; ; n++ {
		var out string
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			b, _ := os.ReadFile(sh.outFile(i))
			out = string(b)
			if strings.Contains(out, "Forwarding from") || strings.Contains(out, "error") {
				break
			}
		}
		if strings.Contains(out, "Forwarding from") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("install.md:%d: %s does not forward: %s", s.line, s.command, out)
		}
		t.Logf("install.md:%d: the port-forward did not start (%s); running it again", s.line, strings.TrimSpace(out))
		time.Sleep(2 * time.Second)
		i = 1000 + 100*i + n // an output file of its own
		if _, _, err := sh.run(i, s.command, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
}

// kubeClientOf is a client of st's cluster.
func kubeClientOf(t *testing.T, st *localstack.Stack) *kubernetes.Clientset {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

// testExists reports whether this package declares the test name.
func testExists(t *testing.T, name string) bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nfunc "+name+"(t *testing.T) {") {
			return true
		}
	}
	return false
}
