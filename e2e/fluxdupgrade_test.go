package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// upgradeAppManifest is a service whose rollout lasts: a new pod counts
// as available only 30 s after it is ready, long enough to upgrade fluxd
// in the middle of it.
const upgradeAppManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: upgradeapp
  namespace: default
spec:
  replicas: 1
  minReadySeconds: 30
  selector:
    matchLabels: {app: upgradeapp}
  template:
    metadata:
      labels: {app: upgradeapp}
    spec:
      containers:
        - name: app
          image: IMAGE
`

// fluxd in a pod is upgraded to a new image while a release rolls out, as
// an operator upgrades it: 'kubectl set image' on the install's
// Deployment. The install's Recreate strategy stops the old pod (the
// kubelet's SIGTERM: it leaves the job live in its database) before the
// new one starts on the same state volume, so two fluxd pods never run
// at once; the new fluxd takes the job over and finishes it. What a user
// checks: one commit for the release in the remote, the new image in the
// cluster, the job succeeded once, its log saying it was left by one
// fluxd and taken over by the next, one release in the history.
func TestFluxdRollingUpgrade(t *testing.T) {
	kc := requireRealNode(t)
	sharedFluxd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const ns = "fluxd-upgrade"
	work := t.TempDir()
	oldImage, err := stack.BuildFluxdImage(ctx, work, "e2e-upgrade-1")
	if err != nil {
		t.Fatal(err)
	}
	// The same binary under a new tag: what changes is the pod.
	newImage, err := stack.BuildFluxdImage(ctx, work, "e2e-upgrade-2")
	if err != nil {
		t.Fatal(err)
	}
	fp, err := stack.InstallFluxdPod(ctx, localstack.FluxdPodOptions{Fluxctl: filepath.Join(binDir, "fluxctl"), Image: oldImage, Namespace: ns,
		Args: []string{"--rollout-timeout=3m"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	deployer := []string{"FLUX_URL=" + fp.Addr, "FLUX_TOKEN=" + fp.Tokens["deployer"], "USER=uma"}
	kubectlEnv := []string{"KUBECONFIG=" + stack.Kubeconfig}
	kubectlBin := filepath.Join(stackBinDir(t), "kubectl")

	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, "upgradeapp", tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	app := stack.Registry + "/upgradeapp:"
	manifest := strings.ReplaceAll(upgradeAppManifest, "IMAGE", app+"1.0.0")
	path := stack.GitPath + "/upgradeapp.yaml"
	pushManifest(t, "Add upgradeapp", map[string]string{path: manifest})
	kubectlApply(t, manifest)
	t.Cleanup(func() { removeManifest(t, path, "upgradeapp") })
	waitRolledOut(t, kc, map[string][]string{"upgradeapp": {"app=" + app + "1.0.0"}})

	id := releaseNoWait(t, deployer, "-s", "default:deployment/upgradeapp", "-i", app+"1.1.0")
	waitJob(t, deployer, id, 2*time.Minute, rollingOut)
	oldPod := fluxdPodIn(t, ns)

	// Watch fluxd's pods while it is upgraded: never two running at once.
	var (
		mu      sync.Mutex
		most    int
		seen    []string
		stopped = make(chan struct{})
		watched = make(chan struct{})
	)
	go func() {
		defer close(watched)
		for {
			pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fluxd"})
			if err == nil {
				// A pod whose fluxd has exited (Succeeded, Failed) is
				// not running, though its object is still there.
				var live []string
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning {
						live = append(live, p.Name+" "+string(p.Status.Phase))
					}
				}
				mu.Lock()
				most = max(most, len(live))
				if len(live) > 1 {
					seen = append(seen, strings.Join(live, ", "))
				}
				mu.Unlock()
			}
			select {
			case <-stopped:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	if out, stderr, code := run(t, kubectlEnv, kubectlBin, "-n", ns, "set", "image", "deployment/fluxd", "fluxd="+newImage); code != 0 {
		t.Fatalf("kubectl set image: %s%s", out, stderr)
	}
	out, stderr, code := run(t, kubectlEnv, kubectlBin, "-n", ns, "rollout", "status", "deployment/fluxd", "--timeout=3m")
	close(stopped)
	<-watched
	if code != 0 {
		t.Fatalf("the upgrade of fluxd did not roll out: %s%s", out, stderr)
	}
	newPod := fluxdPodIn(t, ns)
	if newPod.Name == oldPod.Name || newPod.Spec.Containers[0].Image != newImage {
		t.Fatalf("after the upgrade fluxd's pod is %s running %s; want a new pod running %s", newPod.Name, newPod.Spec.Containers[0].Image, newImage)
	}
	mu.Lock()
	if most > 1 {
		t.Errorf("two fluxd pods running at once during the upgrade: %v", seen)
	}
	mu.Unlock()

	// The new fluxd finishes the job, once.
	waitJob(t, deployer, id, 4*time.Minute, func(j jobJSON) error {
		if j.State != "succeeded" {
			return fmt.Errorf("job is %s/%s %s", j.State, j.Stage, j.Error)
		}
		return nil
	})
	waitRolledOut(t, kc, map[string][]string{"upgradeapp": {"app=" + app + "1.1.0"}})
	log, stderr, code := fluxctl(t, deployer, "job", id, "--log")
	if code != 0 {
		t.Fatalf("fluxctl job %s --log: exit %d\n%s%s", id, code, log, stderr)
	}
	for _, want := range []string{"fluxd is stopping: the job is left for the next fluxd", "taken over by this fluxd after commit", "rolled out"} {
		if !strings.Contains(log, want) {
			t.Errorf("the job's log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "pushed commit"); n != 1 {
		t.Errorf("the job's log says it pushed %d times; want once:\n%s", n, log)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	if n := gitCLI(t, clone, "rev-list", "--count", "--grep=Fluxd-Job: "+id, "HEAD"); n != "1" {
		t.Errorf("the remote has %s commits of job %s; want exactly 1", n, id)
	}
	if n := gitCLI(t, clone, "rev-list", "--count", "-F", "--grep=upgradeapp:1.1.0", "HEAD"); n != "1" {
		t.Errorf("the remote has %s commits releasing upgradeapp:1.1.0; want exactly 1", n)
	}
	hist, stderr, code := fluxctl(t, deployer, "history", "default:deployment/upgradeapp", "-o", "json")
	var events []struct {
		Type    string
		Changes []struct{ To string }
	}
	if code != 0 || json.Unmarshal([]byte(hist), &events) != nil {
		t.Fatalf("history: exit %d\n%s%s", code, hist, stderr)
	}
	releases := 0
	for _, ev := range events {
		if ev.Type == "failed" {
			t.Errorf("the history has a failure:\n%s", hist)
		}
		for _, c := range ev.Changes {
			if ev.Type == "release" && c.To == app+"1.1.0" {
				releases++
			}
		}
	}
	if releases != 1 {
		t.Errorf("the history has %d releases of 1.1.0; want 1:\n%s", releases, hist)
	}
}

// fluxdPodIn is the fluxd pod of namespace ns that is not being deleted.
func fluxdPodIn(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	pods, err := kubeClient(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fluxd"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no fluxd pod in %s", ns)
	return nil
}
