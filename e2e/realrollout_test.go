package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxd/fluxd/internal/localstack"
)

// realAppManifest is a Deployment on the real node: one replica of the
// test program, ready on its /readyz, replaced by surge (the old pod keeps
// serving until a new one is ready).
const realAppManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: realapp
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: realapp}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app: realapp}
    spec:
      terminationGracePeriodSeconds: 2
      nodeSelector: {kubernetes.io/hostname: NODE}
      tolerations:
        - {key: TAINT, operator: Exists, effect: NoSchedule}
      containers:
        - name: app
          image: IMAGE
          readinessProbe:
            httpGet: {path: /readyz, port: 8080}
            periodSeconds: 1
`

// Rollouts on the real node fail the ways pods really fail, and each
// failed release ends with the pod's own reason, in fluxctl's error, in
// the history and on the status page (in headless Chromium: the job's
// page and the history's failed events), and with --rollback-on-failure
// the previous image runs again: a container that exits at once
// (CrashLoopBackOff and its exit code), an image no node can pull
// (ErrImagePull / ImagePullBackOff), and a readiness probe that never
// passes (the kubelet's probe failure).
func TestRealRollouts(t *testing.T) {
	kc := requireRealNode(t)
	f := sharedFluxd(t)
	// Three rollouts that fail on their timeouts (up to 90 s each) run
	// under this one context: testContext's 2 minutes is too short.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=rita"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	good, err := stack.PushAppImage(ctx, "realapp", "1.0.0", localstack.AppServe)
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer("NODE", localstack.RealNodeName, "TAINT", localstack.RealNodeTaint, "IMAGE", good).Replace(realAppManifest)
	addToGitAndCluster(t, "realapp.yaml", manifest)
	waitRealApp(t, kc, good)
	page := openStatusPage(t, "http://"+sharedWebAddr, f.Tokens["viewer"])
	seenJobs := map[string]bool{}
	for _, j := range listJobs(t, viewer) {
		seenJobs[j.ID] = true
	}

	cases := []struct {
		name  string
		image func() (string, error)
		want  []string // in fluxctl's error and the history
		// timeout is the release's rollout timeout: the crash needs
		// the kubelet's first restart inside it to say CrashLoopBackOff,
		// which on a loaded machine took longer than 40 s (CI). (Not more
		// than 90 s: fluxctl, run by the tests' helper, is given 2
		// minutes in all.)
		timeout string
	}{
		{"container exits at once", func() (string, error) {
			return stack.PushAppImage(ctx, "realapp", "1.1.0-crash", localstack.AppCrash)
		}, []string{"CrashLoopBackOff|restarted", "exited with code 3"}, "90s"},
		{"image cannot be pulled", func() (string, error) {
			return stack.UnpullableAppImage(ctx, "realapp", "1.1.0-unpullable")
		}, []string{"ImagePullBackOff|ErrImagePull"}, "40s"},
		{"readiness probe never passes", func() (string, error) {
			return stack.PushAppImage(ctx, "realapp", "1.1.0-notready", localstack.AppNotReady)
		}, []string{"running but not ready", "Readiness probe failed", "503"}, "40s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := tc.image()
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default:deployment/realapp", "-i", bad,
				"--rollout-timeout", tc.timeout, "--rollback-on-failure")
			if code == 0 {
				t.Fatalf("a release of %s succeeded:\n%s", bad, out)
			}
			for _, want := range append([]string{"the rollout of default:deployment/realapp failed", "rolled back in commit"}, tc.want...) {
				if !containsAny(stderr, want) {
					t.Errorf("fluxctl's error lacks %q:\n%s", want, stderr)
				}
			}
			hist, _, _ := fluxctl(t, viewer, "history", "default:deployment/realapp")
			for _, want := range tc.want {
				if !containsAny(hist, want) {
					t.Errorf("the history lacks %q:\n%s", want, hist)
				}
			}
			// The status page says the same: the job's page shows the
			// pod's reason and the rollback.
			id := newFailedJob(t, viewer, seenJobs, "default:deployment/realapp")
			pageErr := page.jobError(t, id, strings.ReplaceAll(tc.name, " ", "-"))
			for _, want := range append([]string{"the rollout of default:deployment/realapp failed", "rolled back in commit"}, tc.want...) {
				if !containsAny(pageErr, want) {
					t.Errorf("the status page's error of job %s lacks %q:\n%s", id, want, pageErr)
				}
			}
			// The rollback: the previous image runs again, Ready.
			waitRealApp(t, kc, good)
		})
	}
	// The history's failed events on the page carry each reason.
	hist := page.failedHistory(t, "default:deployment/realapp")
	for _, tc := range cases {
		for _, want := range tc.want {
			if !containsAny(hist, want) {
				t.Errorf("the status page's failed history of realapp lacks %q (%s):\n%s", want, tc.name, hist)
			}
		}
	}
}

// containsAny reports whether s contains one of the |-separated words.
func containsAny(s, words string) bool {
	for _, w := range strings.Split(words, "|") {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// addToGitAndCluster commits a manifest into the stack's git path and
// creates it in the cluster, as an operator adds a workload; both are
// removed when the test ends.
func addToGitAndCluster(t *testing.T, file, manifest string) {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	path := filepath.Join(stack.GitPath, file)
	if err := os.WriteFile(filepath.Join(clone, path), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, clone, "add", path)
	gitCLI(t, clone, "-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-qm", "add "+file)
	gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
	kubectlApply(t, manifest)
	t.Cleanup(func() {
		_ = kubeClient(t).AppsV1().Deployments("default").Delete(context.Background(), "realapp", metav1.DeleteOptions{})
		c2 := filepath.Join(t.TempDir(), "clone2")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, c2)
		gitCLI(t, c2, "rm", "-q", path)
		gitCLI(t, c2, "-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-qm", "remove "+file)
		gitCLI(t, c2, "push", "-q", "origin", stack.GitBranch)
	})
}

// waitRealApp waits until realapp's only pods run image, Ready.
func waitRealApp(t *testing.T, kc kubernetes.Interface, image string) {
	t.Helper()
	err := poll(context.Background(), 120*time.Second, func() error {
		pods, err := kc.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=realapp"})
		if err != nil {
			return err
		}
		var ready int
		var states []string
		for _, p := range pods.Items {
			states = append(states, p.Name+": "+p.Spec.Containers[0].Image+" "+containerStates(&p))
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s still terminating", p.Name)
			}
			if p.Spec.Containers[0].Image != image {
				return fmt.Errorf("pods: %s", strings.Join(states, "; "))
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != 1 || len(pods.Items) != 1 {
			return fmt.Errorf("pods: %s", strings.Join(states, "; "))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("realapp never ran %s alone and Ready on the real node: %v", image, err)
	}
}
