package e2e

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/history"
)

//go:embed testdata/helmrelease-crds.yaml
var helmReleaseCRDs string

var (
	hrV2 = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	hrV1 = schema.GroupVersionResource{Group: "helm.fluxcd.io", Version: "v1", Resource: "helmreleases"}
)

// TestHelmReleases: a repository of HelmReleases, as Flux v1's
// helm-operator and Flux v2's helm-controller read them, works with fluxd
// with no edits. Five HelmReleases, in five forms:
//   - hrauto (helm.toolkit.fluxcd.io/v2): image.{repository,tag}, Flux v1
//     annotations fluxcd.io/automated and fluxcd.io/tag.chart-image;
//     automated through a registry notification;
//   - hrv1 (helm.fluxcd.io/v1): its image at custom paths named by Flux v1's
//     registry/repository/tag.fluxcd.io annotations; released by hand;
//   - hranchor (helm.toolkit.fluxcd.io/v2beta2): one image under a YAML
//     anchor that two tiers merge (<<: *app), and one in a list item;
//     released by hand, the anchor edited once where it is defined;
//   - hrkust (helm.toolkit.fluxcd.io/v2): built by a kustomization that
//     lists its file; released by hand, the file edited, the kustomization
//     not, and the object applied as built;
//   - hrflat (helm.toolkit.fluxcd.io/v2beta1): backend.image: repo:tag;
//     locked, refused, unlocked and released; its release's Deployment
//     (annotated as Helm 3 annotates it) is its progress.
//
// There is no helm-controller on the stack. For hrauto and hrv1 a test
// actor plays its part: it writes Ready=True (Released=True for v1) at
// the new observedGeneration once a generation appears, as helm-controller
// would after a successful upgrade, and the jobs end rolled out. Nothing
// writes hrflat's status: its release ends committed and applied, not
// rolled out, and says so, as soon as fluxd sees no Helm controller pod.
func TestHelmReleases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	dyn := dynamicClient(t)
	installHelmCRDs(t, dyn)

	reg := stack.Registry
	app := reg + "/helmapp"
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "helmapp", "1.0.0", t0); err != nil {
		t.Fatal(err)
	}
	const dir = "helmrel"
	files := map[string]string{
		dir + "/hrauto.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hrauto
  namespace: default
  annotations:
    fluxcd.io/automated: "true"
    fluxcd.io/tag.chart-image: semver:~1.0
spec:
  interval: 5m
  chart:
    spec: {chart: app, sourceRef: {kind: HelmRepository, name: charts}}
  values:
    # the app's image, set by CI
    image:
      repository: ` + app + `
      tag: "1.0.0" # bumped by automation
    replicaCount: 2
`,
		dir + "/hrv1.yaml": `apiVersion: helm.fluxcd.io/v1
kind: HelmRelease
metadata:
  name: hrv1
  namespace: default
  annotations:
    registry.fluxcd.io/app: app.img.host
    repository.fluxcd.io/app: app.img.repo
    tag.fluxcd.io/app: app.img.version
spec:
  chart: {repository: "https://charts.example.com/", name: app, version: 1.0.0}
  values:
    app:
      img: {host: "` + reg + `", repo: helmapp, version: '1.0.0'}
`,
		dir + "/hranchor.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2beta2
kind: HelmRelease
metadata:
  name: hranchor
  namespace: default
spec:
  chart: {spec: {chart: app}}
  values:
    x-app: &app # one image for both tiers
      image: {repository: ` + app + `, tag: "1.0.0"}
    web:
      <<: *app
    worker:
      <<: *app
    sidecars:
      - name: log
        image: ` + app + `:1.0.0
`,
		dir + "/kust/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - release.yaml\nlabels:\n  - pairs: {built-by: kustomize}\n",
		dir + "/kust/release.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hrkust
  namespace: default
spec:
  chart: {spec: {chart: app}}
  values:
    image: ` + app + `:1.0.0 # the whole image
`,
		dir + "/hrflat.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2beta1
kind: HelmRelease
metadata:
  name: hrflat
  namespace: default
spec:
  chart: {spec: {chart: app}}
  values:
    backend:
      image: ` + app + `:1.0.0
`,
	}
	pushManifest(t, "Add HelmReleases", files)
	t.Cleanup(func() { removeHelmReleases(t, dyn, dir) })
	for name, m := range files {
		if strings.HasPrefix(name, dir+"/kust/") {
			continue // fluxd's sync applies what the kustomization builds
		}
		kubectlApply(t, m)
	}

	// The test actor playing helm-controller, for hrauto and hrv1 only.
	actx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go playHelmController(actx, dyn, map[string]schema.GroupVersionResource{"hrauto": hrV2, "hrv1": hrV1, "hranchor": hrV2, "hrkust": hrV2})

	// hrflat's release installed a Deployment, annotated as Helm 3
	// annotates what it installs: its pods are hrflat's progress.
	kubectlApply(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: hrflat-backend
  namespace: default
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: hrflat, meta.helm.sh/release-namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: hrflat-backend}}
  template:
    metadata: {labels: {app: hrflat-backend}}
    spec:
      containers: [{name: backend, image: `+app+`:1.0.0}]
`)
	t.Cleanup(func() {
		_ = kubeClient(t).AppsV1().Deployments("default").Delete(context.Background(), "hrflat-backend", metav1.DeleteOptions{})
	})

	f := startFaultFluxd(t, "fluxd-helm", dir, nil, "--rollout-timeout=15s",
		"--automation-short-wait=1s", "--automation-long-wait=2s", "--git-poll-interval=2s")
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	// list-services shows the three, with their values' images as
	// containers and hrauto's Flux v1 policy.
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		for _, want := range []string{
			`"default:helmrelease/hrauto"`, `"chart-image"`, `"` + app + `:1.0.0"`, `"semver:~1.0"`,
			`"default:helmrelease/hrv1"`, `"name": "app"`, `"default:helmrelease/hrflat"`, `"backend"`,
		} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("list-services lacks %s:\n%s", want, out)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := fluxctl(t, viewer, "list-images", "default:helmrelease/hrv1"); code != 0 || !strings.Contains(out, "1.0.0") {
		t.Fatalf("list-images: exit %d\n%s%s", code, out, stderr)
	}

	t.Run("automated through a notification", func(t *testing.T) {
		for i, tag := range []string{"1.0.1", "1.1.0"} {
			if err := stack.PushImage(ctx, "helmapp", tag, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if out, stderr, code := fluxctl(t, deployer, "notify", app+":1.1.0"); code != 0 {
			t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
		}
		waitHelmValue(t, dyn, hrV2, "hrauto", "1.0.1", "spec", "values", "image", "tag")
		y := gitShowRemote(t, dir+"/hrauto.yaml")
		for _, want := range []string{"    # the app's image, set by CI\n", "      repository: " + app + "\n", `      tag: "1.0.1" # bumped by automation`, `fluxcd.io/automated: "true"`} {
			if !strings.Contains(y, want) {
				t.Errorf("git after the automated release lacks %q:\n%s", want, y)
			}
		}
		// The history row, as the e2e instance's viewer reads it: a
		// workload automated by Flux v1's annotation names no fluxd
		// instance (fluxd.io/automated-by), so its automated release is
		// recorded under the one instance whose scope holds it, e2e.
		if err := poll(ctx, 60*time.Second, func() error {
			out, stderr, code := fluxctl(t, viewer, "history", "default:helmrelease/hrauto", "-o", "json")
			var evs []struct {
				Type    string
				Changes []struct{ Container, To string }
			}
			if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
				return fmt.Errorf("history: exit %d\n%s%s", code, out, stderr)
			}
			for _, ev := range evs {
				if ev.Type == string(history.AutomatedRelease) && len(ev.Changes) == 1 && ev.Changes[0].Container == "chart-image" && ev.Changes[0].To == app+":1.0.1" {
					return nil
				}
			}
			return fmt.Errorf("history of hrauto has no automated release of chart-image to 1.0.1:\n%s", out)
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a manual release, rolled out", func(t *testing.T) {
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default:helmrelease/hrv1", "-i", app+":1.1.0")
		if code != 0 || !strings.Contains(out, "pushed, applied and rolled out") {
			t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
		}
		if y := gitShowRemote(t, dir+"/hrv1.yaml"); !strings.Contains(y, `img: {host: "`+reg+`", repo: helmapp, version: '1.1.0'}`) {
			t.Errorf("git after the release:\n%s", y)
		}
		waitHelmValue(t, dyn, hrV1, "hrv1", "1.1.0", "spec", "values", "app", "img", "version")
	})

	t.Run("images in a list and under an anchor", func(t *testing.T) {
		// -i moves every container that runs the repository: web and
		// worker (one anchor, so they agree) and sidecars.0.
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default:helmrelease/hranchor", "-i", app+":1.1.0")
		if code != 0 || !strings.Contains(out, "pushed, applied and rolled out") {
			t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
		}
		y := gitShowRemote(t, dir+"/hranchor.yaml")
		for _, want := range []string{
			"    x-app: &app # one image for both tiers\n      image: {repository: " + app + `, tag: "1.1.0"}`,
			"    web:\n      <<: *app\n    worker:\n      <<: *app\n",
			"      - name: log\n        image: " + app + ":1.1.0",
		} {
			if !strings.Contains(y, want) {
				t.Errorf("git after the release lacks %q:\n%s", want, y)
			}
		}
		waitHelmValue(t, dyn, hrV2, "hranchor", "1.1.0", "spec", "values", "worker", "image", "tag")
	})

	t.Run("built by a kustomization", func(t *testing.T) {
		if err := poll(ctx, 60*time.Second, func() error {
			out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
			if !strings.Contains(out, `"default:helmrelease/hrkust"`) {
				return fmt.Errorf("list-services lacks hrkust:\n%s", out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default:helmrelease/hrkust", "-i", app+":1.1.0")
		if code != 0 || !strings.Contains(out, "pushed, applied and rolled out") {
			t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
		}
		if y := gitShowRemote(t, dir+"/kust/release.yaml"); !strings.Contains(y, "    image: "+app+":1.1.0 # the whole image") {
			t.Errorf("git after the release:\n%s", y)
		}
		if y := gitShowRemote(t, dir+"/kust/kustomization.yaml"); strings.Contains(y, "images:") || strings.Contains(y, "1.1.0") {
			t.Errorf("the release edited the kustomization:\n%s", y)
		}
		waitHelmValue(t, dyn, hrV2, "hrkust", app+":1.1.0", "spec", "values", "image")
		hr, err := dyn.Resource(hrV2).Namespace("default").Get(ctx, "hrkust", metav1.GetOptions{})
		if err != nil || hr.GetLabels()["built-by"] != "kustomize" {
			t.Errorf("hrkust in the cluster is not as the kustomization builds it: %v %v", err, hr.GetLabels())
		}
	})

	t.Run("locked, then released with no controller", func(t *testing.T) {
		if out, stderr, code := fluxctl(t, deployer, "lock", "default:helmrelease/hrflat", "-m", "freeze"); code != 0 {
			t.Fatalf("lock: exit %d\n%s%s", code, out, stderr)
		}
		if y := gitShowRemote(t, dir+"/hrflat.yaml"); !strings.Contains(y, `fluxd.io/locked: "true"`) {
			t.Fatalf("git after lock:\n%s", y)
		}
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default:helmrelease/hrflat", "-i", app+":1.1.0")
		if code == 0 && !strings.Contains(out+stderr, "locked") {
			t.Fatalf("a release of a locked HelmRelease: exit %d\n%s%s", code, out, stderr)
		}
		if y := gitShowRemote(t, dir+"/hrflat.yaml"); !strings.Contains(y, "image: "+app+":1.0.0") {
			t.Fatalf("git after a refused release of a locked HelmRelease:\n%s", y)
		}
		if out, stderr, code := fluxctl(t, deployer, "unlock", "default:helmrelease/hrflat"); code != 0 {
			t.Fatalf("unlock: exit %d\n%s%s", code, out, stderr)
		}
		if err := poll(ctx, 60*time.Second, func() error {
			d, err := kubeClient(t).AppsV1().Deployments("default").Get(ctx, "hrflat-backend", metav1.GetOptions{})
			if err != nil || d.Status.ReadyReplicas != 2 {
				return fmt.Errorf("hrflat-backend is not ready: %v", err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, stderr, code = fluxctl(t, deployer, "release", "-y", "-s", "default:helmrelease/hrflat", "-i", app+":1.1.0")
		took := time.Since(start)
		if code != 0 || !strings.Contains(out, "NOT rolled out") || strings.Contains(out, "pushed, applied and rolled out") {
			t.Fatalf("release with no controller: exit %d, want a job that says it is applied, not rolled out\n%s%s", code, out, stderr)
		}
		// No helm-controller pod runs on the stack: fluxd says so after
		// its grace (half the 15s timeout here), not after the timeout.
		if !strings.Contains(out, "no Helm controller runs in the cluster") || took >= 15*time.Second {
			t.Errorf("release with no controller took %v; want it to end before the 15s timeout saying no Helm controller runs:\n%s", took, out)
		}
		// Its progress is its release's Deployment's pods, not 0/0.
		if !strings.Contains(out, "default:helmrelease/hrflat: 2/2 updated, 2 ready, 2 available") {
			t.Errorf("release progress does not show hrflat-backend's pods:\n%s", out)
		}
		if y := gitShowRemote(t, dir+"/hrflat.yaml"); !strings.Contains(y, "image: "+app+":1.1.0") {
			t.Errorf("git after the release:\n%s", y)
		}
		waitHelmValue(t, dyn, hrV2, "hrflat", app+":1.1.0", "spec", "values", "backend", "image")
		hist, _, _ := fluxctl(t, viewer, "history", "default:helmrelease/hrflat", "-o", "json")
		if !strings.Contains(hist, "not rolled out") {
			t.Errorf("history does not say the release was not rolled out:\n%s", hist)
		}
		// automate writes fluxd's own annotation on a HelmRelease that
		// had none, as on any workload.
		if out, stderr, code := fluxctl(t, deployer, "automate", "hr/hrflat"); code != 0 {
			t.Fatalf("automate: exit %d\n%s%s", code, out, stderr)
		}
		if y := gitShowRemote(t, dir+"/hrflat.yaml"); !strings.Contains(y, `fluxd.io/automated: "true"`) {
			t.Errorf("git after automate:\n%s", y)
		}
	})
}

// dynamicClient is a dynamic client on the stack, as its admin.
func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	if stack == nil {
		t.Skip("needs the local stack (not started under -short)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(rc)
}

// installHelmCRDs installs the HelmRelease CRDs and waits until both
// groups are served.
func installHelmCRDs(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	kubectlApply(t, helmReleaseCRDs)
	if err := poll(context.Background(), 60*time.Second, func() error {
		for _, gvr := range []schema.GroupVersionResource{hrV2, hrV1} {
			if _, err := dyn.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the HelmRelease CRDs are not served: %v", err)
	}
}

// playHelmController stands in for Flux's helm-controller, for the named
// HelmReleases only: whenever one's generation is ahead of its status, it
// reports a successful upgrade at that generation (Ready, or Flux v1's
// Released), as helm-controller does.
func playHelmController(ctx context.Context, dyn dynamic.Interface, names map[string]schema.GroupVersionResource) {
	for ctx.Err() == nil {
		for name, gvr := range names {
			hr, err := dyn.Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			gen := hr.GetGeneration()
			if seen, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration"); seen == gen {
				continue
			}
			typ := "Ready"
			if gvr.Group == "helm.fluxcd.io" {
				typ = "Released"
			}
			hr.Object["status"] = map[string]any{
				"observedGeneration": gen,
				"conditions": []any{map[string]any{
					"type": typ, "status": "True", "reason": "UpgradeSucceeded", "observedGeneration": gen,
					"message": "played by the e2e test's stand-in for helm-controller", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
				}},
			}
			_, _ = dyn.Resource(gvr).Namespace("default").UpdateStatus(ctx, hr, metav1.UpdateOptions{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitHelmValue waits until the HelmRelease in the cluster has want at
// path.
func waitHelmValue(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name, want string, path ...string) {
	t.Helper()
	if err := poll(context.Background(), 90*time.Second, func() error {
		hr, err := dyn.Resource(gvr).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(hr.Object, path...)
		if got != want {
			return fmt.Errorf("helmrelease %s has %s = %q in the cluster, want %q", name, strings.Join(path, "."), got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// removeHelmReleases removes the test's HelmReleases from git and the
// cluster, and the CRDs.
func removeHelmReleases(t *testing.T, dyn dynamic.Interface, dir string) {
	clone := filepath.Join(t.TempDir(), "rm-clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	if _, err := os.Stat(filepath.Join(clone, dir)); err == nil {
		gitCLI(t, clone, "rm", "-q", "-r", dir)
		gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove "+dir)
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
	}
	for name, gvr := range map[string]schema.GroupVersionResource{"hrauto": hrV2, "hrv1": hrV1, "hrflat": hrV2, "hranchor": hrV2, "hrkust": hrV2} {
		if err := dyn.Resource(gvr).Namespace("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !errors.IsNotFound(err) {
			t.Logf("deleting helmrelease %s: %v", name, err)
		}
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"helmreleases.helm.toolkit.fluxcd.io", "helmreleases.helm.fluxcd.io"} {
		_ = dyn.Resource(crd).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}
