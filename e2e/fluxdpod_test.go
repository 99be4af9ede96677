package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// fluxd runs in a pod on the real node from its own image, installed with
// what 'fluxctl install' renders, and does there what it does as a
// process: its probes pass, it runs as its non-root user on a read-only
// root filesystem, keeps its records on its state volume across a pod
// restart, generates its deploy key into the Secret fluxd-ssh and pushes
// a release over SSH with it, logs to 'kubectl logs', and answers fluxctl
// through 'kubectl port-forward'.
func TestFluxdInAPod(t *testing.T) {
	kc := requireRealNode(t)
	// The build has a context of its own, and the test's 2 minutes start
	// after it: a cold static build with cgo takes minutes beside the
	// other shards (CI saw 'make static' killed at testContext's 2
	// minutes, then the pod restart out of time), and it is not what
	// this test judges.
	bctx, bcancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer bcancel()
	image, err := stack.BuildFluxdImage(bctx, t.TempDir(), "e2e-pod-1")
	if err != nil {
		t.Fatal(err)
	}
	// Its install, two releases over SSH and a pod restart: testContext's
	// 2 minutes ran out before the restart on a loaded CI machine (the
	// pod asks for 100m of CPU beside three test shards).
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	fp, err := stack.InstallFluxdPod(ctx, localstack.FluxdPodOptions{Fluxctl: filepath.Join(binDir, "fluxctl"), Image: image, Namespace: podNS})
	// Its fluxd watches the shared git remote and automates what the
	// shared fluxd does: left running, it raced later tests' automated
	// releases (TestTooManyRequestsStormLosesNoAutomation saw it push a
	// release it could not apply). Its namespace goes with the test.
	t.Cleanup(func() {
		_ = kubeClient(t).CoreV1().Namespaces().Delete(context.Background(), podNS, metav1.DeleteOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"FLUX_URL=" + fp.Addr, "FLUX_TOKEN=" + fp.Tokens["admin"], "USER=pat"}
	kubectlEnv := []string{"KUBECONFIG=" + stack.Kubeconfig}
	kubectlBin := filepath.Join(stackBinDir(t), "kubectl")

	t.Run("probes pass on the health listener", func(t *testing.T) {
		pod := fluxdPod(t)
		c := pod.Spec.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Fatalf("readiness probe %+v, want /readyz", c.ReadinessProbe)
		}
		ready := false
		for _, cs := range pod.Status.ContainerStatuses {
			ready = ready || (cs.Ready && cs.Started != nil && *cs.Started)
		}
		if !ready {
			t.Errorf("the pod's container is not Ready: %+v", pod.Status.ContainerStatuses)
		}
		// A readiness probe answered 503 is fluxd saying "not ready yet"
		// while it starts (its clone, its first sync), which on a loaded
		// machine outlasts the probe's 5 s initial delay (CI saw one):
		// the probe works. Any other failure (no answer, a wrong port, a
		// liveness failure) is one.
		out, stderr, code := run(t, kubectlEnv, kubectlBin, "-n", podNS, "get", "events", "--field-selector", "involvedObject.name="+pod.Name+",reason=Unhealthy",
			"-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
		if code != 0 {
			t.Fatalf("reading the pod's events: %s%s", out, stderr)
		}
		for _, msg := range strings.Split(strings.TrimSpace(out), "\n") {
			if msg == "" || strings.HasPrefix(msg, "Readiness probe failed") && strings.Contains(msg, "statuscode: 503") {
				if msg != "" {
					t.Logf("while starting: %s", msg)
				}
				continue
			}
			t.Errorf("probe failure recorded for %s: %s", pod.Name, msg)
		}
	})

	t.Run("non-root on a read-only root filesystem", func(t *testing.T) {
		pid := fluxdPID(t, fp.Addr)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "Uid:") && strings.Fields(line)[1] != "65532" {
				t.Errorf("fluxd's process runs as %q, want uid 65532", line)
			}
		}
		if opts := rootMountOptions(t, pid); !strings.Contains(","+opts+",", ",ro,") {
			t.Errorf("fluxd's root filesystem is mounted %q, want ro", opts)
		}
	})

	t.Run("deploy key in fluxd-ssh, pushed with over SSH", func(t *testing.T) {
		sec, err := kc.CoreV1().Secrets(podNS).Get(ctx, "fluxd-ssh", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(sec.Data["identity"]) == 0 {
			t.Fatalf("the Secret fluxd-ssh holds no key: keys %v", keysOf(sec.Data))
		}
		out, stderr, code := fluxctl(t, admin, "identity")
		if code != 0 || strings.TrimSpace(out) != fp.Identity {
			t.Fatalf("fluxctl identity: exit %d %q%s, want %q", code, out, stderr, fp.Identity)
		}
		before := remoteHead(t)
		out, stderr, code = fluxctl(t, admin, "release", "-y", "-s", "default:deployment/worker", "--update-image", stack.Registry+"/worker:1.0.1")
		if code != 0 {
			t.Fatalf("release from the pod: exit %d\n%s%s", code, out, stderr)
		}
		if after := remoteHead(t); after == before {
			t.Fatalf("the remote's head did not move: the pod pushed nothing")
		}
		// The shared stack's worker is the release tests' (release_test.go
		// runs later and expects 1.0.0): put it back.
		if out, stderr, code := fluxctl(t, admin, "release", "-y", "-s", "default:deployment/worker", "--update-image", stack.Registry+"/worker:1.0.0"); code != 0 {
			t.Fatalf("putting worker back: exit %d\n%s%s", code, out, stderr)
		}
	})

	t.Run("kubectl logs", func(t *testing.T) {
		out, stderr, code := run(t, kubectlEnv, kubectlBin, "-n", podNS, "logs", "deploy/fluxd")
		if code != 0 || !strings.Contains(out, "release") {
			t.Errorf("kubectl logs: exit %d, %d bytes%s; want fluxd's log with the release", code, len(out), stderr)
		}
	})

	t.Run("fluxctl through kubectl port-forward", func(t *testing.T) {
		local, err := localstack.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, lport, _ := net.SplitHostPort(local)
		_, rport, _ := net.SplitHostPort(fp.Addr)
		pf := exec.Command(kubectlBin, "-n", podNS, "port-forward", "deploy/fluxd", lport+":"+rport)
		pf.Env = append(os.Environ(), kubectlEnv...)
		stdout, _ := pf.StdoutPipe()
		pf.Stderr = pf.Stdout
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || !strings.Contains(sc.Text(), "Forwarding from") {
			t.Fatalf("kubectl port-forward: %q", sc.Text())
		}
		go func() {
			for sc.Scan() {
			}
		}()
		out, stderr, code := fluxctl(t, []string{"FLUX_URL=" + local, "FLUX_TOKEN=" + fp.Tokens["viewer"]}, "list-services")
		if code != 0 || !strings.Contains(out, "default:deployment/worker") {
			t.Errorf("fluxctl list-services through port-forward: exit %d\n%s%s", code, out, stderr)
		}
	})

	t.Run("state volume survives a pod restart", func(t *testing.T) {
		old := fluxdPod(t).Name
		name, err := localstack.RestartFluxdPod(ctx, stack.Dir, podNS)
		if err != nil {
			t.Fatal(err)
		}
		if name == old {
			t.Fatalf("the pod %s was not replaced", name)
		}
		out, stderr, code := fluxctl(t, admin, "history", "default:deployment/worker")
		if code != 0 || !hasLine(out, "release", "default:deployment/worker", "-> 1.0.1") {
			t.Errorf("after the restart, history lacks the release made before it: exit %d\n%s%s", code, out, stderr)
		}
	})
}

// podNS is the namespace of the tests' fluxd pod, apart from the
// install tests' "fluxd".
const podNS = "fluxd-pod"

func fluxdPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods, err := kubeClient(t).CoreV1().Pods(podNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fluxd"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no fluxd pod")
	return nil
}

// fluxdPID finds the process of the pod's fluxd on this machine (the node)
// by its --listen address.
func fluxdPID(t *testing.T, addr string) int {
	t.Helper()
	var found int
	err := poll(context.Background(), 30*time.Second, func() error {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), "--listen="+addr+"\x00") {
				found, _ = strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return nil
			}
		}
		return fmt.Errorf("no process listens with --listen=%s", addr)
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// rootMountOptions returns the mount options of pid's root filesystem.
func rootMountOptions(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return f[5]
		}
	}
	t.Fatalf("no root mount in /proc/%d/mountinfo", pid)
	return ""
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
