package e2e

// Every commit fluxd pushes is exactly what was planned, against what git
// holds at that moment (issue 26): the three situations that broke it,
// reproduced on the real stack.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// withAnnotations adds annotations to a manifest written by
// rollingManifest.
func withAnnotations(manifest string, ann map[string]string) string {
	var lines []string
	for k, v := range ann {
		lines = append(lines, fmt.Sprintf("    %s: %q\n", k, v))
	}
	return strings.Replace(manifest, "  namespace: default\n", "  namespace: default\n  annotations:\n"+strings.Join(lines, ""), 1)
}

// gitShow is a file as the remote's branch holds it.
func gitShow(t *testing.T, path string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "show-clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	return gitCLI(t, clone, "show", "HEAD:"+path)
}

// A release is planned (1.0.0 → 1.1.0). While fluxd pushes, on-call
// pushes a hotfix image and locks the service. fluxd's push is refused
// because the branch moved; it plans again from the new head, finds
// that the service changed under its plan (and is locked), and fails
// with nothing pushed, naming the person's commit. git keeps the hotfix.
func TestHotfixPushedDuringAReleaseIsKept(t *testing.T) {
	sharedFluxd(t)
	img := faultService(t, "inv-hotfix", "hotfixweb", 1, 0, "1.1.0", "1.0.1-hotfix")
	proxy := newGitProxy(t)
	f := startFaultFluxd(t, "fluxd-hotfix", "inv-hotfix", nil, "--git-url="+proxy.url, "--git-poll-interval=1h")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=quinn"}

	before := remoteHead(t)
	hotfix := withAnnotations(rollingManifest("hotfixweb", img+"1.0.1-hotfix", 1, 0),
		map[string]string{"fluxd.io/locked": "true", "fluxd.io/lock-message": "hotfix, do not release"})
	interposed := false
	push := func() {
		interposed = true
		pushManifest(t, "Hotfix hotfixweb and lock it", map[string]string{"inv-hotfix/hotfixweb.yaml": hotfix})
	}
	proxy.Interpose.Store(&push)
	out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "hotfixweb", "-i", img+"1.1.0")
	if !interposed {
		t.Fatalf("the proxy never saw fluxd's push (exit %d)\n%s%s", code, out, stderr)
	}
	if code == 0 {
		t.Errorf("the release succeeded over the hotfix:\n%s%s", out, stderr)
	}
	msg := out + stderr
	for _, want := range []string{"nothing was pushed", "Hotfix hotfixweb and lock it", "dana"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not say %q:\n%s", want, msg)
		}
	}
	if got := commitsSince(t, before, "inv-hotfix"); len(got) != 1 || got[0] != "Hotfix hotfixweb and lock it" {
		t.Errorf("commits since the release began: %q; want the hotfix alone", got)
	}
	if y := gitShow(t, "inv-hotfix/hotfixweb.yaml"); !strings.Contains(y, img+"1.0.1-hotfix") || !strings.Contains(y, `fluxd.io/locked: "true"`) {
		t.Errorf("git no longer holds the hotfix under its lock:\n%s", y)
	}
	if got := historyTypes(t, env, "hotfixweb"); len(got) != 1 || got[0] != "failed" {
		t.Errorf("history of hotfixweb: %v; want one failed release", got)
	}
}

// A kustomization builds kweb and kapi, both on one image; kapi is
// locked. Releasing kweb alone would write an images: entry that moves
// kapi too: the release is refused, naming kapi and its lock, and
// nothing is pushed. A dry run of --all lists kweb as skipped because of
// kapi.
func TestKustomizeReleaseLeavesALockedSiblingAlone(t *testing.T) {
	sharedFluxd(t)
	ctx := testContext(t)
	repo := stack.Registry + "/kustshared"
	for _, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, "kustshared", tag, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	workload := func(name string, ann string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + ann + "spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: " + name + "}\n  template:\n    metadata:\n      labels: {app: " + name + "}\n    spec:\n      containers:\n        - name: app\n          image: " + repo + ":1.0.0\n"
	}
	overlay := "namespace: invkust\nresources:\n  - ../base\n"
	pushManifest(t, "Add kweb and kapi", map[string]string{
		"inv-kust/base/kustomization.yaml": "resources: [kweb.yaml, kapi.yaml]\n",
		"inv-kust/base/kweb.yaml":          workload("kweb", ""),
		"inv-kust/base/kapi.yaml":          workload("kapi", "  annotations:\n    fluxd.io/locked: \"true\"\n    fluxd.io/lock-message: \"payments freeze\"\n"),
		"inv-kust/prod/kustomization.yaml": overlay,
	})
	f := startFaultFluxd(t, "fluxd-kust", "inv-kust/prod", nil, "--git-poll-interval=1h")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=quinn"}
	before := remoteHead(t)

	out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "invkust:deployment/kweb", "-i", repo+":1.1.0")
	if code == 0 {
		t.Errorf("releasing kweb alone succeeded:\n%s%s", out, stderr)
	}
	if msg := out + stderr; !strings.Contains(msg, "invkust:deployment/kapi") || !strings.Contains(msg, "payments freeze") {
		t.Errorf("the refusal does not name the locked sibling:\n%s", msg)
	}
	if got := commitsSince(t, before, "inv-kust"); len(got) != 0 {
		t.Errorf("commits since the release: %q; want none", got)
	}
	if y := gitShow(t, "inv-kust/prod/kustomization.yaml"); strings.TrimSpace(y) != strings.TrimSpace(overlay) {
		t.Errorf("the kustomization changed:\n%s", y)
	}

	out, stderr, code = fluxctl(t, env, "release", "--dry-run", "--all", "-i", repo+":1.1.0")
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, stderr)
	}
	var kwebLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "kweb") {
			kwebLine += l + "\n"
		}
	}
	if !strings.Contains(out, "kapi") || !strings.Contains(kwebLine+out, "shares") {
		t.Errorf("the dry run does not say why kweb is left alone:\n%s", out)
	}
}

// An HorizontalPodAutoscaler targets hpaweb, which it has at 5 replicas
// while git says 2. A release applies the new image and leaves the
// replicas to the autoscaler, as the sync does; the sync that follows
// leaves them too: 5 stays 5.
func TestReleaseLeavesReplicasToTheAutoscaler(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	img := faultService(t, "inv-hpa", "hpaweb", 2, 0, "1.1.0")
	hpa := `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: hpaweb
  namespace: default
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: hpaweb}
  minReplicas: 1
  maxReplicas: 10
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
`
	pushManifest(t, "Autoscale hpaweb", map[string]string{"inv-hpa/hpa.yaml": hpa})
	kubectlApply(t, hpa)
	t.Cleanup(func() {
		_ = kc.AutoscalingV2().HorizontalPodAutoscalers("default").Delete(context.Background(), "hpaweb", metav1.DeleteOptions{})
		_ = kc.CoreV1().ConfigMaps("default").Delete(context.Background(), "fluxd-sync-inv-hpa", metav1.DeleteOptions{})
	})
	// The autoscaler's count, set as it sets it: through the scale
	// subresource.
	scale, err := kc.AppsV1().Deployments("default").GetScale(ctx, "hpaweb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 5
	if _, err := kc.AppsV1().Deployments("default").UpdateScale(ctx, "hpaweb", scale, metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler"}); err != nil {
		t.Fatal(err)
	}
	replicas := func() int32 {
		d, err := kc.AppsV1().Deployments("default").Get(ctx, "hpaweb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil {
			return -1
		}
		return *d.Spec.Replicas
	}
	f := startFaultFluxd(t, "fluxd-hpa", "inv-hpa", nil, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-sync-inv-hpa")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=quinn"}
	if out, stderr, code := fluxctl(t, env, "sync"); code != 0 {
		t.Fatalf("the first sync: exit %d\n%s%s", code, out, stderr)
	}
	if got := replicas(); got != 5 {
		t.Fatalf("after the first sync hpaweb has %d replicas; want the autoscaler's 5", got)
	}

	out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "hpaweb", "-i", img+"1.1.0")
	if code != 0 {
		t.Fatalf("release: exit %d\n%s%s\nlog: %s", code, out, stderr, stack.Log("fluxd-hpa"))
	}
	if got := replicas(); got != 5 {
		t.Errorf("after the release hpaweb has %d replicas; want the autoscaler's 5", got)
	}
	if out, stderr, code := fluxctl(t, env, "sync"); code != 0 {
		t.Fatalf("the sync after the release: exit %d\n%s%s", code, out, stderr)
	}
	if got := replicas(); got != 5 {
		t.Errorf("after the sync that followed the release hpaweb has %d replicas; want the autoscaler's 5", got)
	}
	if got := images(t, kc)["hpaweb"]; strings.Join(got, " ") != "app="+img+"1.1.0" {
		t.Errorf("hpaweb runs %v after the release", got)
	}
}
