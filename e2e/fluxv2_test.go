package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxV2ImageAutomation: a repository written for Flux v2's image
// automation works with fluxd with no edits. It holds an ImageRepository,
// an ImagePolicy (semver) and an ImageUpdateAutomation, and three fields
// marked with $imagepolicy: a Deployment's image (whole image), a
// ConfigMap's tag (:tag) and a kustomization's images: newTag (:tag).
//   - a registry notification makes fluxd push one commit that updates
//     all three within the policy's range, keeps every comment byte for
//     byte, is authored as the automation's git.commit.author, and rolls
//     out both Deployments;
//   - fluxctl lock on the ImagePolicy's service holds it: a newer image
//     and a notification change nothing;
//   - a manual release (forced past the lock) updates the fields.
func TestFluxV2ImageAutomation(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	repo := stack.Registry + "/fluxv2app"
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "fluxv2app", "1.0.0", t0); err != nil {
		t.Fatal(err)
	}
	const svc = "flux-system:imagepolicy/fluxv2app"
	files := map[string]string{
		"deploy/fluxv2/image-automation.yaml": fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: fluxv2app
  namespace: flux-system
spec:
  image: %s
  interval: 1m
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: fluxv2app
  namespace: flux-system
spec:
  imageRepositoryRef:
    name: fluxv2app
  policy:
    semver:
      range: ">=1.0.0 <2.0.0"
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageUpdateAutomation
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 30m
  sourceRef:
    kind: GitRepository
    name: flux-system
  git:
    commit:
      author:
        email: fluxcdbot@users.noreply.github.com
        name: fluxcdbot
  update:
    path: ./deploy
    strategy: Setters
`, repo),
		"deploy/fluxv2/app.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: fluxv2
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: fluxv2}
  template:
    metadata:
      labels: {app: fluxv2}
    spec:
      containers:
        - name: app
          image: %[1]s:1.0.0 # {"$imagepolicy": "flux-system:fluxv2app"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fluxv2-config
  namespace: default
data:
  TAG: "1.0.0"   # {"$imagepolicy": "flux-system:fluxv2app:tag"}
  OTHER: "1.0.0" # not a marker: left alone
`, repo),
		"deploy/fluxv2-kust/kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
images:
  - name: %s
    newTag: 1.0.0 # {"$imagepolicy": "flux-system:fluxv2app:tag"}
`, repo),
		"deploy/fluxv2-kust/deployment.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: fluxv2k
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: fluxv2k}
  template:
    metadata:
      labels: {app: fluxv2k}
    spec:
      containers:
        - name: app
          image: %s:0.0.1
`, repo),
	}
	pushManifest(t, "Add a repository written for Flux v2 image automation", files)
	t.Cleanup(func() {
		clone := t.TempDir() + "/rm"
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		gitCLI(t, clone, "rm", "-rq", "deploy/fluxv2", "deploy/fluxv2-kust")
		gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove the Flux v2 test's files")
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
		for _, d := range []string{"fluxv2", "fluxv2k"} {
			_ = kc.AppsV1().Deployments("default").Delete(context.Background(), d, metav1.DeleteOptions{})
		}
	})

	// fluxd lists the ImagePolicy as an automated service, with its
	// fields and its policy.
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		for _, want := range []string{svc, "deploy/fluxv2/app.yaml:ConfigMap/fluxv2-config:data.TAG", "deploy/fluxv2-kust/kustomization.yaml:Kustomization:images[0].newTag", "ImagePolicy semver:"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("list-services lacks %q:\n%s", want, out)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Automation through a notification: 1.2.0 is in range, 2.0.0 not.
	for i, tag := range []string{"1.2.0", "2.0.0"} {
		if err := stack.PushImage(ctx, "fluxv2app", tag, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":2.0.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"fluxv2": {"app=" + repo + ":1.2.0"}, "fluxv2k": {"app=" + repo + ":1.2.0"}})
	checkFields := func(tag string) {
		t.Helper()
		for _, path := range []string{"deploy/fluxv2/app.yaml", "deploy/fluxv2-kust/kustomization.yaml"} {
			want := strings.ReplaceAll(files[path], "1.0.0", tag)
			if path == "deploy/fluxv2/app.yaml" {
				// The unmarked field stays as it was.
				want = strings.Replace(want, `OTHER: "`+tag+`"`, `OTHER: "1.0.0"`, 1)
			}
			// (gitCLI trims the output's last line break.)
			if got := gitShowRemote(t, path); got != strings.TrimRight(want, "\n") {
				t.Errorf("%s in git is not the file with only its marked values changed to %s (comments and all else byte for byte):\n--- got\n%s\n--- want\n%s", path, tag, got, want)
			}
		}
	}
	checkFields("1.2.0")
	if author := gitLogRemote(t, "--format=%an <%ae>"); author != "fluxcdbot <fluxcdbot@users.noreply.github.com>" {
		t.Errorf("the automated commit's author is %q, want the ImageUpdateAutomation's git.commit.author", author)
	}

	// list-images ranks the policy's fields under the ImagePolicy, not
	// under fluxd's default filter.
	out, stderr, code := fluxctl(t, viewer, "list-images", svc, "-o", "json")
	if code != 0 {
		t.Fatalf("list-images: exit %d\n%s%s", code, out, stderr)
	}
	var rows []struct {
		Container string `json:"container"`
		Filter    string `json:"filter"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("list-images -o json: %v, %d rows:\n%s", err, len(rows), out)
	}
	for _, r := range rows {
		if r.Filter != "semver:>=1.0.0 <2.0.0" {
			t.Errorf("list-images shows %s under filter %q, want the ImagePolicy's semver:>=1.0.0 <2.0.0", r.Container, r.Filter)
		}
	}

	// A lock holds it: a newer image in range and a notification change
	// nothing.
	if out, stderr, code := fluxctl(t, deployer, "lock", svc, "-m", "freeze"); code != 0 {
		t.Fatalf("lock: exit %d\n%s%s", code, out, stderr)
	}
	if y := gitShowRemote(t, "deploy/fluxv2/image-automation.yaml"); !strings.Contains(y, `fluxd.io/locked: "true"`) {
		t.Errorf("after fluxctl lock, the ImagePolicy in git has no lock:\n%s", y)
	}
	head := gitLogRemote(t, "--format=%H")
	if err := stack.PushImage(ctx, "fluxv2app", "1.3.0", t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":1.3.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	// The automator waits 1–2 s in this fluxd; give it several times that.
	time.Sleep(10 * time.Second)
	if now := gitLogRemote(t, "--format=%H"); now != head {
		t.Errorf("the locked ImagePolicy was released by the automator: head moved to %s (%s)", now, gitLogRemote(t, "--format=%s"))
	}
	checkFields("1.2.0")

	// A manual release, forced past the lock, edits the fields.
	if out, stderr, code := fluxctl(t, deployer, "release", "-y", "--force", "-s", svc, "-i", repo+":1.3.0"); code != 0 {
		t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"fluxv2": {"app=" + repo + ":1.3.0"}, "fluxv2k": {"app=" + repo + ":1.3.0"}})
	checkFields("1.3.0")
	if author := gitLogRemote(t, "--format=%an"); author != "erin" {
		t.Errorf("the manual release's author is %q, want the user", author)
	}
}

// TestFluxV2LockImagePolicyInAKustomization: Flux v2's usual layout keeps
// the ImagePolicy in the kustomization's directory, beside the workload
// whose newTag it marks. fluxctl lock on its service writes the lock on
// the ImagePolicy in its own file and holds the automation; unlock puts
// the file back as it was.
func TestFluxV2LockImagePolicyInAKustomization(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	repo := stack.Registry + "/fluxv2lock"
	t0 := time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "fluxv2lock", "1.0.0", t0); err != nil {
		t.Fatal(err)
	}
	const svc = "flux-system:imagepolicy/fluxv2lock"
	const policyFile = "deploy/fluxv2-lock/image-automation.yaml"
	files := map[string]string{
		policyFile: fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: fluxv2lock
  namespace: flux-system
spec:
  image: %s
---
# The policy the team watches.
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: fluxv2lock
  namespace: flux-system
spec:
  imageRepositoryRef:
    name: fluxv2lock
  policy:
    semver:
      range: ">=1.0.0"
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageUpdateAutomation
metadata:
  name: fluxv2-lock
  namespace: flux-system
spec:
  update:
    path: ./deploy/fluxv2-lock
    strategy: Setters
`, repo),
		"deploy/fluxv2-lock/kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
  - image-automation.yaml
images:
  - name: %s
    newTag: 1.0.0 # {"$imagepolicy": "flux-system:fluxv2lock:tag"}
`, repo),
		"deploy/fluxv2-lock/deployment.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: fluxv2lock
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: fluxv2lock}
  template:
    metadata:
      labels: {app: fluxv2lock}
    spec:
      containers:
        - name: app
          image: %s:0.0.1
`, repo),
	}
	pushManifest(t, "Add an ImagePolicy in a kustomization's directory", files)
	t.Cleanup(func() {
		clone := t.TempDir() + "/rm"
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		gitCLI(t, clone, "rm", "-rq", "deploy/fluxv2-lock")
		gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove the Flux v2 lock test's files")
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), "fluxv2lock", metav1.DeleteOptions{})
	})
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		if !strings.Contains(out, svc) {
			return fmt.Errorf("list-services lacks %s:\n%s", svc, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Locked before any newer image: the automation never moves it.
	if out, stderr, code := fluxctl(t, deployer, "lock", svc, "-m", "freeze"); code != 0 {
		t.Fatalf("lock: exit %d\n%s%s", code, out, stderr)
	}
	if y := gitShowRemote(t, policyFile); !strings.Contains(y, `fluxd.io/locked: "true"`) || !strings.Contains(y, "# The policy the team watches.") {
		t.Errorf("after fluxctl lock, the ImagePolicy in git has no lock (or lost its comment):\n%s", y)
	}
	if err := stack.PushImage(ctx, "fluxv2lock", "1.1.0", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":1.1.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	// The automator waits 1–2 s in this fluxd; give it several times that.
	time.Sleep(10 * time.Second)
	if k := gitShowRemote(t, "deploy/fluxv2-lock/kustomization.yaml"); !strings.Contains(k, "newTag: 1.0.0") {
		t.Errorf("the locked ImagePolicy's newTag moved:\n%s", k)
	}
	// Unlocked, the file is as it was, and the automation moves on.
	if out, stderr, code := fluxctl(t, deployer, "unlock", svc); code != 0 {
		t.Fatalf("unlock: exit %d\n%s%s", code, out, stderr)
	}
	if y := gitShowRemote(t, policyFile); y != strings.TrimRight(files[policyFile], "\n") {
		t.Errorf("after lock and unlock, %s is not as it was:\n%s", policyFile, y)
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":1.1.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	if err := poll(ctx, 60*time.Second, func() error {
		if k := gitShowRemote(t, "deploy/fluxv2-lock/kustomization.yaml"); !strings.Contains(k, "newTag: 1.1.0") {
			return fmt.Errorf("the unlocked ImagePolicy's newTag is not 1.1.0:\n%s", k)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// gitLogRemote is one git log field of the remote branch's head.
func gitLogRemote(t *testing.T, format string) string {
	t.Helper()
	clone := t.TempDir() + "/log"
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	return strings.TrimSpace(gitCLI(t, clone, "log", "-1", format))
}
