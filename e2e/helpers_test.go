// The helpers that three or more of e2e's test files use, moved here from
// the files where they began. A helper of one feature stays in its file.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/internal/localstack"
)

func kubeClient(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	if stack == nil {
		t.Skip("needs the local stack (not started under -short)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Polls must not wait on client-go's default 5 requests per second.
	rc.QPS, rc.Burst = 500, 1000
	return kubernetes.NewForConfigOrDie(rc)
}

// gitCLI runs the git CLI, an independent client of the remote.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func remoteHead(t *testing.T) string {
	t.Helper()
	out := gitCLI(t, "", "ls-remote", stack.GitURL, "refs/heads/"+stack.GitBranch)
	return strings.Fields(out)[0]
}

// images returns each Deployment's container images, "name=image".
func images(t *testing.T, kc kubernetes.Interface) map[string][]string {
	t.Helper()
	ds, err := kc.AppsV1().Deployments("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range ds.Items {
		spec := d.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			out[d.Name] = append(out[d.Name], c.Name+"="+c.Image)
		}
	}
	return out
}

func rolledOut(d *appsv1.Deployment) error {
	want := *d.Spec.Replicas
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
		return fmt.Errorf("%s: generation %d/%d, updated %d, available %d, total %d, want %d", d.Name, st.ObservedGeneration, d.Generation, st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, want)
	}
	return nil
}

func waitRolledOut(t *testing.T, kc kubernetes.Interface, want map[string][]string) {
	t.Helper()
	err := poll(context.Background(), 90*time.Second, func() error {
		for name, imgs := range want {
			d, err := kc.AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got := images(t, kc)[name]
			if strings.Join(got, " ") != strings.Join(imgs, " ") {
				return fmt.Errorf("%s runs %v, want %v", name, got, imgs)
			}
			if err := rolledOut(d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("rollout on the kwok nodes did not complete: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// hasLine reports whether one line of out contains all of parts.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// run runs a binary with env and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	return out.String(), errb.String(), code
}

func fluxctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	// Start from a clean slate: no FLUX_* from the developer's shell.
	// git's own user (fluxctl's default author) must not be the machine's: the
	// tests name their users with USER=.
	base := []string{"FLUX_URL=", "FLUX_TOKEN=", "FLUX_TIMEOUT=", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	return run(t, append(base, env...), filepath.Join(binDir, "fluxctl"), args...)
}

func stackBinDir(t *testing.T) string {
	t.Helper()
	d, err := localstack.BinDir(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// poll retries check until it passes or timeout; the timeout bounds a wait
// for the cluster, it is not a performance assertion.
func poll(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pushManifest commits files (path → content) to the stack's git remote,
// as a person would, and returns the new head.
func pushManifest(t testing.TB, message string, files map[string]string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	for path, content := range files {
		full := filepath.Join(clone, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		gitCLI(t, clone, "add", path)
	}
	gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", message)
	gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
	return gitCLI(t, clone, "rev-parse", "HEAD")
}

// removeManifest deletes a file from the stack's git remote, and the
// Deployment it defined from the cluster, so that later tests do not see
// the service.
func removeManifest(t testing.TB, path, deployment string) {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "rm-clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	gitCLI(t, clone, "rm", "-q", path)
	gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove "+path)
	gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
	_ = kubeClient(t).AppsV1().Deployments("default").Delete(context.Background(), deployment, metav1.DeleteOptions{})
}

// policyDeployment is a one-replica Deployment with policy annotations.
func policyDeployment(name, image string, annotations map[string]string) string {
	var ann strings.Builder
	for k, v := range annotations {
		fmt.Fprintf(&ann, "    %s: %q\n", k, v)
	}
	return fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
  annotations:
%[3]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s
`, name, image, ann.String())
}

// rollingManifest is a Deployment of replicas pods that count as
// available only after minReady seconds, so that a rollout lasts long
// enough to do something to fluxd or the cluster in the middle of it.
func rollingManifest(name, image string, replicas, minReady int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[3]d
  minReadySeconds: %[4]d
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s
`, name, image, replicas, minReady)
}

// faultService pushes images 1.0.0 (running) and the given other tags of
// repository name, commits its manifest under dir/ in git, applies it to
// the cluster and waits until it has rolled out. It deletes the
// Deployment when the test ends.
func faultService(t *testing.T, dir, name string, replicas, minReady int, tags ...string) string {
	t.Helper()
	ctx := testContext(t)
	img := stack.Registry + "/" + name + ":"
	t0 := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range append([]string{"1.0.0"}, tags...) {
		if err := stack.PushImage(ctx, name, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	m := rollingManifest(name, img+"1.0.0", replicas, minReady)
	pushManifest(t, "Add "+name, map[string]string{dir + "/" + name + ".yaml": m})
	kubectlApply(t, m)
	t.Cleanup(func() {
		_ = kubeClient(t).AppsV1().Deployments("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	waitRolledOut(t, kubeClient(t), map[string][]string{name: {"app=" + img + "1.0.0"}})
	return img
}

// kubectlApply applies a manifest with the stack's kubectl.
func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, []string{"KUBECONFIG=" + stack.Kubeconfig}, filepath.Join(stackBinDir(t), "kubectl"), "apply", "-f", f)
	if code != 0 {
		t.Fatalf("kubectl apply: %s%s", out, stderr)
	}
}

// startFaultFluxd starts a fluxd of its own on manifests under dir, and
// stops it with SIGTERM when the test ends.
func startFaultFluxd(t *testing.T, name, dir string, tokens map[string]string, extra ...string) *localstack.Fluxd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--git-path=" + dir, "--automation-long-wait=10m", "--automation-short-wait=10m"}, extra...)
	f, err := stack.StartNamedFluxd(ctx, name, filepath.Join(binDir, "fluxd"), instance, tokens, args...)
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log(name))
	}
	t.Cleanup(func() { _ = f.Signal(syscall.SIGTERM) })
	return f
}

// releaseNoWait starts a release and returns its job ID.
func releaseNoWait(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, stderr, code := fluxctl(t, env, append([]string{"release", "-y", "--no-wait"}, args...)...)
	if code != 0 || !strings.Contains(out, "Job ") {
		t.Fatalf("release %v: exit %d\n%s%s", args, code, out, stderr)
	}
	return strings.Fields(strings.SplitN(out, "Job ", 2)[1])[0]
}

// waitJob polls a job until check passes.
func waitJob(t *testing.T, env []string, id string, timeout time.Duration, check func(j jobJSON) error) jobJSON {
	t.Helper()
	var last jobJSON
	err := poll(context.Background(), timeout, func() error {
		last = jobOf(t, env, id)
		return check(last)
	})
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return last
}

// historyTypes lists the types of a service's history rows, oldest first.
func historyTypes(t *testing.T, env []string, svc string) []string {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "history", svc, "-o", "json")
	var evs []struct{ Type string }
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	var types []string
	for i := len(evs) - 1; i >= 0; i-- {
		types = append(types, evs[i].Type)
	}
	return types
}

// commitsSince lists the subjects of the remote's commits after rev that
// touch dir, oldest first (other tests' fluxd may commit elsewhere).
func commitsSince(t *testing.T, rev, dir string) []string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "log-clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	out := gitCLI(t, clone, "log", "--reverse", "--format=%s", rev+"..HEAD", "--", dir)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func browse(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("%s: %v\nthe page says:\n%s", step, err, page)
	}
}

// value runs an action that reads something off the page.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("reading the page: %v\nthe page says:\n%s", err, page)
	}
	return v
}

// reloadPage reloads the page from its own script and waits until the new
// document has loaded. chromedp.Reload waits for a load event it can miss
// on a loaded machine (a CI run hung in it for the rest of the browser
// test's 6 minutes; chromedp issue 355 is the same race on navigation),
// so this one looks at the document instead: the old one's mark is gone.
func reloadPage() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := chromedp.Evaluate[chromedp.Void](`window.__fluxdOldDocument = true; setTimeout(() => location.reload(), 0)`)(ctx, tg); err != nil {
			return err
		}
		for {
			// Errors while the old document goes are expected: ask again.
			loaded, err := chromedp.Evaluate[bool](`window.__fluxdOldDocument !== true && document.readyState === 'complete'`)(ctx, tg)
			if err == nil && loaded {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the page to load again: %w", ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// waitText waits until the element's text contains want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : ''; })()`, sel)
		var got string
		for {
			v, err := chromedp.Evaluate[string](js)(ctx, tg)
			if err == nil {
				got = v
				if strings.Contains(got, want) {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s to say %q (it says %q): %w", sel, want, got, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// waitHTTP waits until url answers.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	err := poll(context.Background(), 30*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the status page at %s: %v", url, err)
	}
}

// gitShowRemote is a file as the stack's git remote holds it now.
func gitShowRemote(t *testing.T, path string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "show")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	return gitCLI(t, clone, "show", "HEAD:"+path)
}

// requireRealNode skips when the stack was asked for fake nodes only
// (FLUXD_STACK_REAL_NODE=0) and returns a client.
func requireRealNode(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	if !stack.HasRealNode() {
		t.Skip("the stack runs no real node (FLUXD_STACK_REAL_NODE=0)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

type jobJSON struct{ ID, State, Stage, Commit, Error string }
