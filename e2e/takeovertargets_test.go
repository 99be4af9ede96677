package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A job taken over in Flux v2's usual layout (an ImagePolicy's marker on
// a kustomization's images: newTag) applies the workload the kustomization
// builds and follows its rollout. The job records, when it is planned,
// the workloads it applies; the take-over used to look them up by the
// plan's old image, which git no longer held once the release was pushed,
// so it applied nothing and reported success.
//
// fluxd is stopped (SIGTERM) while the release rolls out, and the
// Deployment is put back at its old image meanwhile, as a fluxd that died
// between its push and its apply leaves it: the next fluxd must apply the
// release itself. (Issue 35, item 3, on the stack.)
func TestTakeOverAppliesAFluxV2KustomizationsWorkload(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	const (
		dir  = "faults-v2take"
		name = "v2take"
		svc  = "flux-system:imagepolicy/v2take"
	)
	repo := stack.Registry + "/" + name
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, name, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// The rollout lasts long enough (minReadySeconds) to stop fluxd in
	// the middle of it. The ImagePolicy is locked, so that the automator
	// leaves it to the release by hand.
	files := map[string]string{
		dir + "/kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
  - image-automation.yaml
images:
  - name: %s
    newTag: 1.0.0 # {"$imagepolicy": "flux-system:%s:tag"}
`, repo, name),
		dir + "/deployment.yaml": rollingManifest(name, repo+":0.0.1", 1, 15),
		dir + "/image-automation.yaml": fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: %[1]s
  namespace: flux-system
spec:
  image: %[2]s
  interval: 1m
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: %[1]s
  namespace: flux-system
  annotations:
    fluxd.io/locked: "true"
spec:
  imageRepositoryRef:
    name: %[1]s
  policy:
    semver:
      range: ">=1.0.0 <2.0.0"
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageUpdateAutomation
metadata:
  name: %[1]s
  namespace: flux-system
spec:
  interval: 30m
  sourceRef:
    kind: GitRepository
    name: flux-system
  update:
    path: ./%[3]s
    strategy: Setters
`, name, repo, dir),
	}
	pushManifest(t, "Add a Flux v2 kustomization with an ImagePolicy's newTag", files)
	old := rollingManifest(name, repo+":1.0.0", 1, 15)
	kubectlApply(t, old)
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	waitRolledOut(t, kc, map[string][]string{name: {"app=" + repo + ":1.0.0"}})

	fname := "fluxd-v2take"
	f := startFaultFluxd(t, fname, dir, nil, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=olga"}
	id := releaseNoWait(t, env, "--force", "-s", svc, "-i", repo+":1.1.0", "--rollout-timeout", "180s")
	job := waitJob(t, env, id, 90*time.Second, rollingOut)
	if job.Commit == "" {
		t.Fatalf("rolling out without a commit: %+v", job)
	}
	if err := f.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !f.Wait(30 * time.Second) {
		t.Fatalf("fluxd %d still runs 30 s after SIGTERM", f.PID)
	}
	if log, _ := os.ReadFile(stack.Log(fname)); !strings.Contains(string(log), "left live for the next fluxd") {
		t.Fatalf("fluxd's log does not say it left the job for the next fluxd")
	}
	if got := gitShowRemote(t, dir+"/kustomization.yaml"); !strings.Contains(got, `newTag: 1.1.0 # {"$imagepolicy": "flux-system:v2take:tag"}`) {
		t.Fatalf("the release's newTag is not in git:\n%s", got)
	}
	// The cluster as a fluxd that died before its apply leaves it.
	kubectlApply(t, old)
	waitRolledOut(t, kc, map[string][]string{name: {"app=" + repo + ":1.0.0"}})

	f = startFaultFluxd(t, fname, dir, f.Tokens, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env[0] = "FLUX_URL=" + f.Addr
	job = waitJob(t, env, id, 200*time.Second, ended)
	// Read at once: a job that succeeded followed the rollout to its end.
	d, err := kc.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.State != "succeeded" {
		t.Fatalf("the taken-over job ended %+v; want it succeeded\nfluxd's log: %s", job, stack.Log(fname))
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != repo+":1.1.0" {
		t.Errorf("the taken-over job succeeded, and the Deployment runs %s; want the release's %s:1.1.0 applied", img, repo)
	}
	if err := rolledOut(d); err != nil {
		t.Errorf("the taken-over job succeeded before the rollout ended: %v", err)
	}
	out, stderr, code := fluxctl(t, env, "job", id, "--log")
	if code != 0 {
		t.Fatalf("job --log: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"applies default:deployment/" + name + " (marked field, " + dir + "/kustomization.yaml)", "taken over by this fluxd", "default:deployment/" + name + ": rolled out"} {
		if !strings.Contains(out, want) {
			t.Errorf("the job's log lacks %q:\n%s", want, out)
		}
	}
	// History: the one release, by its commit, recorded by the take-over.
	out, stderr, code = fluxctl(t, env, "history", svc, "-o", "json")
	var evs []struct{ Type, Commit, Error string }
	if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	if len(evs) != 1 || evs[0].Type != "release" || evs[0].Commit == "" || !strings.HasPrefix(job.Commit, evs[0].Commit) && !strings.HasPrefix(evs[0].Commit, job.Commit) || evs[0].Error != "" {
		t.Errorf("history of %s: %+v; want the one release of commit %.12s", svc, evs, job.Commit)
	}
}
