package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		for _, want := range []string{svc, "deploy/fluxv2/app.yaml:ConfigMap/default/fluxv2-config:data.TAG", "deploy/fluxv2-kust/kustomization.yaml:Kustomization:images[0].newTag", "ImagePolicy semver:"} {
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

// TestFluxV2Layouts: the Flux v2 layouts where markers meet kustomize,
// Lists, namespaces and digests, released by one registry push and its
// notification, with nothing in the cluster beforehand (the shared
// fluxd's sync is off: what runs is what the releases applied):
//   - a marker on a shared base's images: entry: the base and both
//     overlays built from it run the new tag;
//   - a marker in a kind: List's item: the item's Deployment is released
//     (the render check names it by the item, not the List);
//   - same-named Deployments in two namespaces of one file: each is
//     edited and each runs the new tag;
//   - :digest, with digestReflectionPolicy IfNotPresent: the whole-image
//     field becomes repository:tag@digest of the new tag, and the :digest
//     field beside a :tag one holds that digest.
func TestFluxV2Layouts(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	const twinNS = "fluxv2-twin"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: twinNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	repo := stack.Registry + "/fluxv2lay"
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "fluxv2lay", "1.0.0", t0); err != nil {
		t.Fatal(err)
	}
	d1 := digestOf(t, ctx, "fluxv2lay", "1.0.0")
	deployment := func(name, ns, image string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
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
          image: %[3]s
`, name, ns, image)
	}
	indent := func(s, by string) string {
		return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by) + "\n"
	}
	files := map[string]string{
		"deploy/fluxv2lay/automation.yaml": fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: lay, namespace: flux-system}
spec: {image: %s}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: lay, namespace: flux-system}
spec:
  imageRepositoryRef: {name: lay}
  policy: {semver: {range: ">=1.0.0"}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: laydig, namespace: flux-system}
spec:
  imageRepositoryRef: {name: lay}
  digestReflectionPolicy: IfNotPresent
  policy: {semver: {range: ">=1.0.0"}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {name: lay, namespace: flux-system}
spec:
  update: {path: ./deploy/fluxv2lay, strategy: Setters}
  git: {commit: {author: {name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}}
`, repo),
		"deploy/fluxv2lay/base/kustomization.yaml": fmt.Sprintf(`resources: [deployment.yaml]
images:
  - name: %s
    newTag: 1.0.0 # {"$imagepolicy": "flux-system:lay:tag"}
`, repo),
		"deploy/fluxv2lay/base/deployment.yaml":         deployment("lay-base", "default", repo+":0.0.1"),
		"deploy/fluxv2lay/overlay-a/kustomization.yaml": "nameSuffix: -a\nresources: [../base]\n",
		"deploy/fluxv2lay/overlay-b/kustomization.yaml": "nameSuffix: -b\nresources: [../base]\n",
		"deploy/fluxv2lay/list.yaml": "apiVersion: v1\nkind: List\nitems:\n  - " +
			strings.TrimPrefix(indent(deployment("lay-list", "default", repo+`:1.0.0 # {"$imagepolicy": "flux-system:lay"}`), "    "), "    "),
		"deploy/fluxv2lay/twins.yaml": deployment("lay-twin", "default", repo+`:1.0.0 # {"$imagepolicy": "flux-system:lay"}`) + "---\n" +
			deployment("lay-twin", twinNS, repo+`:1.0.0 # {"$imagepolicy": "flux-system:lay"}`),
		"deploy/fluxv2lay/digest.yaml": deployment("lay-digest", "default", repo+":1.0.0@"+d1+` # {"$imagepolicy": "flux-system:laydig"}`) + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: lay-digest, namespace: default}
data:
  tag: 1.0.0 # {"$imagepolicy": "flux-system:laydig:tag"}
  digest: ` + d1 + ` # {"$imagepolicy": "flux-system:laydig:digest"}
`,
	}
	pushManifest(t, "Add Flux v2 layouts: a base with overlays, a List, twins, digests", files)
	deployments := []string{"lay-base", "lay-base-a", "lay-base-b", "lay-list", "lay-twin", "lay-digest"}
	t.Cleanup(func() {
		clone := t.TempDir() + "/rm"
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		gitCLI(t, clone, "rm", "-rq", "deploy/fluxv2lay")
		gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove the Flux v2 layouts")
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
		for _, d := range deployments {
			_ = kc.AppsV1().Deployments("default").Delete(context.Background(), d, metav1.DeleteOptions{})
		}
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), twinNS, metav1.DeleteOptions{})
	})

	// Each field is named with its object's namespace; the List's item
	// by itself.
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		for _, want := range []string{
			"deploy/fluxv2lay/base/kustomization.yaml:images[0].newTag",
			"deploy/fluxv2lay/list.yaml:Deployment/default/lay-list:spec.template.spec.containers[0].image",
			"deploy/fluxv2lay/twins.yaml:Deployment/default/lay-twin:spec.template.spec.containers[0].image",
			"deploy/fluxv2lay/twins.yaml:Deployment/" + twinNS + "/lay-twin:spec.template.spec.containers[0].image",
			"deploy/fluxv2lay/digest.yaml:ConfigMap/default/lay-digest:data.digest",
		} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("list-services lacks %q:\n%s", want, out)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := stack.PushImage(ctx, "fluxv2lay", "1.2.0", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	d2 := digestOf(t, ctx, "fluxv2lay", "1.2.0")
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":1.2.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	tagged := "app=" + repo + ":1.2.0"
	waitRolledOut(t, kc, map[string][]string{
		"lay-base": {tagged}, "lay-base-a": {tagged}, "lay-base-b": {tagged},
		"lay-list": {tagged}, "lay-twin": {tagged},
		"lay-digest": {"app=" + repo + ":1.2.0@" + d2},
	})
	if err := poll(ctx, 60*time.Second, func() error {
		d, err := kc.AppsV1().Deployments(twinNS).Get(ctx, "lay-twin", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != repo+":1.2.0" {
			return fmt.Errorf("%s/lay-twin runs %s", twinNS, got)
		}
		return nil
	}); err != nil {
		t.Errorf("the twin in the other namespace was not released: %v", err)
	}

	// git holds each file with only its marked values changed.
	want := map[string]string{}
	for path, content := range files {
		if path == "deploy/fluxv2lay/automation.yaml" || strings.Contains(path, "overlay") || path == "deploy/fluxv2lay/base/deployment.yaml" {
			continue
		}
		want[path] = strings.ReplaceAll(strings.ReplaceAll(content, "1.0.0", "1.2.0"), d1, d2)
	}
	for path, w := range want {
		if got := gitShowRemote(t, path); got != strings.TrimRight(w, "\n") {
			t.Errorf("%s in git is not the file with only its marked values changed:\n--- got\n%s\n--- want\n%s", path, got, w)
		}
	}
}

// gitLogRemote is one git log field of the remote branch's head.
func gitLogRemote(t *testing.T, format string) string {
	t.Helper()
	clone := t.TempDir() + "/log"
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	return strings.TrimSpace(gitCLI(t, clone, "log", "-1", format))
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
