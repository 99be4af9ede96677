package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/internal/localstack"
)

// The sync tests keep their manifests under syncDir in the stack's git
// repository, in namespace syncNS, so that the shared fluxd (deploy/)
// never sees them.
const (
	syncDir = "synctest"
	syncNS  = "synctest"
)

func syncManifests(image string, replicas int, setting string) map[string]string {
	return map[string]string{
		syncDir + "/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + syncNS + "\n",
		syncDir + "/settings.yaml": fmt.Sprintf(`# Hand-written settings.
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %s
data:
  greeting: %q
`, syncNS, setting),
		syncDir + "/web.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: %[3]d
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: %[2]s
`, syncNS, image, replicas),
		// A CRD and a custom resource of it, in one commit: the sync must
		// apply the CRD, wait for it, then the resource.
		syncDir + "/widgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.fluxd.io
spec:
  group: e2e.fluxd.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`,
		syncDir + "/widget.yaml": "apiVersion: e2e.fluxd.io/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: " + syncNS + "\nspec:\n  size: 3\n",
		// Kept when it leaves git: it opts out of pruning.
		syncDir + "/keeper.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keeper\n  namespace: " + syncNS + "\n  annotations:\n    fluxd.io/prune: disabled\ndata: {a: b}\n",
	}
}

func dynClient(t testing.TB) dynamic.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(rc)
}

var widgets = schema.GroupVersionResource{Group: "e2e.fluxd.io", Version: "v1", Resource: "widgets"}
var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// cleanUpSync deletes what the sync tests made in the cluster.
func cleanUpSync(t *testing.T) {
	ctx := context.Background()
	kc := kubeClient(t)
	_ = kc.CoreV1().Namespaces().Delete(ctx, syncNS, metav1.DeleteOptions{})
	_ = dynClient(t).Resource(crds).Delete(ctx, "widgets.e2e.fluxd.io", metav1.DeleteOptions{})
	_ = dynClient(t).Resource(crds).Delete(ctx, "gadgets.e2e.fluxd.io", metav1.DeleteOptions{})
	_ = kc.CoreV1().ConfigMaps("default").Delete(ctx, "fluxd-sync-e2e", metav1.DeleteOptions{})
	// A namespace is deleted in the background: the next sync test's
	// fluxd found synctest still terminating, applied into it, and lost
	// it when it went (CI: 'namespaces "synctest" not found' in
	// TestSyncCorrectsDrift). Wait until it is gone.
	for i := 0; i < 600; i++ {
		if _, err := kc.CoreV1().Namespaces().Get(ctx, syncNS, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("namespace %s is still there 2 min after its deletion", syncNS)
}

// stopFluxd stops a fluxd with SIGTERM and waits for it to exit.
func stopFluxd(t *testing.T, f *localstack.Fluxd) {
	t.Helper()
	f.Stop(syscall.SIGTERM, 20*time.Second)
}

type syncOut struct {
	Revision string `json:"revision"`
	Objects  []struct {
		Object, Source, Action, Error string
		Diff                          []string
	} `json:"objects"`
	Problems []string `json:"problems"`
}

func (s syncOut) action(object string) string {
	for _, o := range s.Objects {
		if o.Object == object {
			return o.Action
		}
	}
	return ""
}

type syncService struct {
	ID         string `json:"id"`
	SyncState  string `json:"syncState"`
	SyncDetail string `json:"syncDetail"`
	Replicas   struct {
		Desired int32 `json:"desired"`
	} `json:"replicas"`
	Containers []struct {
		Name, Image, Goal string
	} `json:"containers"`
}

func syncServices(t *testing.T, env []string) map[string]syncService {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "list-services", "-n", syncNS, "-o", "json")
	if code != 0 {
		t.Fatalf("list-services: exit %d: %s", code, stderr)
	}
	var svcs []syncService
	if err := json.Unmarshal([]byte(out), &svcs); err != nil {
		t.Fatalf("list-services -o json: %v\n%s", err, out)
	}
	m := map[string]syncService{}
	for _, s := range svcs {
		m[s.ID] = s
	}
	return m
}

// TestSyncAppliesGit runs a fluxd that syncs only when asked (its poll
// and sync intervals are an hour): its first sync applies a Namespace, a
// Deployment, ConfigMaps, a CRD and a custom resource of it from one
// commit; a dry run names what a pushed edit would change and changes
// nothing; 'fluxctl sync' applies it at once; an invalid object is
// reported with its file and line while the rest is applied; pruning
// deletes what left git and only that.
func TestSyncAppliesGit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	t.Cleanup(func() { cleanUpSync(t) })
	ctx := testContext(t)
	kc := kubeClient(t)
	dyn := dynClient(t)
	img := stack.Registry + "/helloworld:"
	pushManifest(t, "Add the sync test's manifests", syncManifests(img+"1.0.0", 2, "hello"))

	metrics, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "sync-a", syncDir, nil, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-prune", "--sync-inventory=default/fluxd-sync-e2e", "--metrics-listen="+metrics)
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}

	// The first sync runs at start.
	err = poll(ctx, 60*time.Second, func() error {
		d, err := kc.AppsV1().Deployments(syncNS).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 {
			return fmt.Errorf("web has %d replicas", *d.Spec.Replicas)
		}
		if _, err := dyn.Resource(widgets).Namespace(syncNS).Get(ctx, "w1", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("widget w1: %w", err)
		}
		_, err = kc.CoreV1().ConfigMaps(syncNS).Get(ctx, "settings", metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("the first sync did not apply git: %v\nlog: %s", err, stack.Log("sync-a"))
	}
	d, _ := kc.AppsV1().Deployments(syncNS).Get(ctx, "web", metav1.GetOptions{})
	if !managedByFluxd(d.ManagedFields) {
		t.Errorf("web's fields are not managed by fluxd: %+v", d.ManagedFields)
	}

	t.Run("dry run names the change and changes nothing", func(t *testing.T) {
		// A CRD and a resource of it in one file: in a dry run the CRD
		// does not exist yet, and its resource would be created after it.
		gadgets := strings.NewReplacer("widget", "gadget", "Widget", "Gadget").Replace(syncManifests("", 0, "")[syncDir+"/widgets.yaml"]) + // line 1
			"---\napiVersion: e2e.fluxd.io/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: " + syncNS + "\n" // line 18
		pushManifest(t, "Greet differently, add gadgets", map[string]string{
			syncDir + "/settings.yaml": syncManifests("", 0, "bonjour")[syncDir+"/settings.yaml"],
			syncDir + "/gadgets.yaml":  gadgets,
		})
		out, stderr, code := fluxctl(t, env, "sync", "--dry-run")
		if code != 0 {
			t.Fatalf("sync --dry-run: exit %d\n%s%s", code, out, stderr)
		}
		if !hasLine(out, "CustomResourceDefinition/gadgets.e2e.fluxd.io would be created") || !hasLine(out, "Gadget/synctest/g1 would be created", "gadgets.yaml:18") {
			t.Errorf("the dry run does not show the new CRD and its resource as created:\n%s", out)
		}
		if !hasLine(out, "ConfigMap/synctest/settings would be configured", "synctest/settings.yaml:2") || !strings.Contains(out, "/data/greeting: bonjour") {
			t.Errorf("the dry run does not name the change:\n%s", out)
		}
		cm, err := kc.CoreV1().ConfigMaps(syncNS).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || cm.Data["greeting"] != "hello" {
			t.Errorf("a dry run changed the cluster: %v %v", cm.Data, err)
		}
	})

	t.Run("fluxctl sync applies at once", func(t *testing.T) {
		out, stderr, code := fluxctl(t, env, "sync")
		if code != 0 || !hasLine(out, "ConfigMap/synctest/settings configured") {
			t.Fatalf("sync: exit %d\n%s%s", code, out, stderr)
		}
		cm, err := kc.CoreV1().ConfigMaps(syncNS).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || cm.Data["greeting"] != "bonjour" {
			t.Fatalf("right after 'fluxctl sync' the ConfigMap is %v (%v), want greeting bonjour", cm.Data, err)
		}
		gadgets := schema.GroupVersionResource{Group: "e2e.fluxd.io", Version: "v1", Resource: "gadgets"}
		if _, err := dyn.Resource(gadgets).Namespace(syncNS).Get(ctx, "g1", metav1.GetOptions{}); err != nil {
			t.Errorf("a CRD and its resource in one file: the resource was not created: %v\n%s", err, out)
		}
		out, stderr, code = fluxctl(t, env, "sync", "-o", "json")
		var s syncOut
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.action("ConfigMap/synctest/settings") != "unchanged" || s.action("Widget/synctest/w1") != "unchanged" {
			t.Errorf("a second sync of the same commit changed something (exit %d):\n%s%s", code, out, stderr)
		}
	})

	t.Run("an invalid object is reported, the rest applied", func(t *testing.T) {
		bad := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n  namespace: %[1]s\ndata: {ok: \"yes\"}\n---\n# The container's name is not a DNS label: refused.\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\n  namespace: %[1]s\nspec:\n  selector:\n    matchLabels: {app: bad}\n  template:\n    metadata:\n      labels: {app: bad}\n    spec:\n      containers:\n        - name: Not_A_Label\n          image: %[2]s1.0.0\n", syncNS, img)
		rev := pushManifest(t, "Add a bad Deployment", map[string]string{syncDir + "/bad.yaml": bad})
		out, stderr, code := fluxctl(t, env, "sync")
		if code == 0 || !strings.Contains(out, "Deployment/synctest/bad failed (synctest/bad.yaml:9)") || !strings.Contains(stderr, "failed for some objects") {
			t.Fatalf("sync of an invalid object: exit %d\n%s%s", code, out, stderr)
		}
		if _, err := kc.CoreV1().ConfigMaps(syncNS).Get(ctx, "fine", metav1.GetOptions{}); err != nil {
			t.Errorf("the valid object beside the invalid one was not applied: %v", err)
		}
		svcs := syncServices(t, env)
		if s := svcs["synctest:deployment/bad"]; s.SyncState != "failed" || !strings.Contains(s.SyncDetail, "synctest/bad.yaml:9") {
			t.Errorf("list-services shows the bad Deployment as %q (%s), want failed at synctest/bad.yaml:9", s.SyncState, s.SyncDetail)
		}
		if s := svcs["synctest:deployment/web"]; s.SyncState != "synced" {
			t.Errorf("web is %q (%s), want synced", s.SyncState, s.SyncDetail)
		}
		out, stderr, code = fluxctl(t, env, "history", "-o", "json")
		var evs []struct{ Type, Commit, Message, Error string }
		if code != 0 || json.Unmarshal([]byte(out), &evs) != nil {
			t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
		}
		found := false
		for _, ev := range evs {
			if ev.Type == "sync" && ev.Commit == rev && strings.Contains(ev.Error, "synctest/bad.yaml:9") && strings.Contains(ev.Message, "created ConfigMap/synctest/fine") {
				found = true
			}
		}
		if !found {
			t.Errorf("history has no sync event of %s with the failure and the object created:\n%s", rev, out)
		}
		if failed, n := metric(t, metrics, "fluxd_sync_failed"), metric(t, metrics, "fluxd_sync_failed_objects"); failed != "1" || n != "1" {
			t.Errorf("metrics: fluxd_sync_failed %q, fluxd_sync_failed_objects %q; want 1 and 1", failed, n)
		}
	})

	t.Run("prune deletes only what fluxd applied", func(t *testing.T) {
		if _, err := kc.CoreV1().ConfigMaps(syncNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Data: map[string]string{"x": "y"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		gitCLI(t, clone, "rm", "-q", syncDir+"/bad.yaml", syncDir+"/keeper.yaml")
		gitCLI(t, clone, "-c", "user.name=dana", "-c", "user.email=dana@example.invalid", "commit", "-q", "-m", "Remove the bad Deployment, fine and keeper")
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
		out, stderr, code := fluxctl(t, env, "sync")
		if code != 0 || !hasLine(out, "ConfigMap/synctest/fine deleted") {
			t.Fatalf("sync: exit %d\n%s%s", code, out, stderr)
		}
		if _, err := kc.CoreV1().ConfigMaps(syncNS).Get(ctx, "fine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap fine left git and fluxd applied it, but it was not pruned: %v", err)
		}
		if failed := metric(t, metrics, "fluxd_sync_failed"); failed != "0" {
			t.Errorf("metrics: fluxd_sync_failed %q after a sync that succeeded", failed)
		}
		for _, name := range []string{"by-hand", "keeper", "settings"} {
			if _, err := kc.CoreV1().ConfigMaps(syncNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("ConfigMap %s was deleted: %v", name, err)
			}
		}
	})
	stopFluxd(t, f)
}

func managedByFluxd(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if f.Manager == "fluxd" && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// TestSyncCorrectsDrift runs a fluxd that polls git every second and syncs
// every 5 s: a hand edit pushed to git reaches the cluster by itself;
// 'kubectl scale' and 'kubectl set image' show as drift in list-services
// (the GOAL image beside the running one) and are undone.
func TestSyncCorrectsDrift(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	t.Cleanup(func() { cleanUpSync(t) })
	ctx := testContext(t)
	kc := kubeClient(t)
	img := stack.Registry + "/helloworld:"
	pushManifest(t, "Add the sync test's manifests", syncManifests(img+"1.0.0", 3, "hi"))
	f := startFaultFluxd(t, "sync-b", syncDir, nil, "--sync-interval=5s", "--git-poll-interval=1s", "--sync-inventory=default/fluxd-sync-e2e")
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	kubectl := filepath.Join(stackBinDir(t), "kubectl")
	kenv := []string{"KUBECONFIG=" + stack.Kubeconfig}
	replicas := func(want int32) func() error {
		return func() error {
			d, err := kc.AppsV1().Deployments(syncNS).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if *d.Spec.Replicas != want {
				return fmt.Errorf("web has %d replicas, want %d", *d.Spec.Replicas, want)
			}
			return nil
		}
	}
	if err := poll(ctx, 60*time.Second, replicas(3)); err != nil {
		t.Fatalf("the first sync: %v\nlog: %s", err, stack.Log("sync-b"))
	}

	t.Run("a hand edit in git reaches the cluster", func(t *testing.T) {
		pushManifest(t, "Scale web to 4 by hand", map[string]string{syncDir + "/web.yaml": syncManifests(img+"1.0.0", 4, "")[syncDir+"/web.yaml"]})
		start := time.Now()
		if err := poll(ctx, 30*time.Second, replicas(4)); err != nil {
			t.Fatalf("the edit did not reach the cluster: %v", err)
		}
		t.Logf("the edit reached the cluster %s after the push", time.Since(start).Round(time.Millisecond))
	})

	// drift changes the cluster by hand and waits for list-services to
	// show it; the sync may undo it first, so it tries a few times.
	drift := func(t *testing.T, change []string, shows func(syncService) bool) {
		t.Helper()
		for try := 0; try < 5; try++ {
			if out, stderr, code := run(t, kenv, kubectl, change...); code != 0 {
				t.Fatalf("kubectl %v: %s%s", change, out, stderr)
			}
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) {
				s := syncServices(t, env)["synctest:deployment/web"]
				if shows(s) {
					t.Logf("list-services: %s: %s", s.SyncState, s.SyncDetail)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		t.Fatalf("list-services never showed the drift of kubectl %v: %+v", change, syncServices(t, env)["synctest:deployment/web"])
	}

	t.Run("kubectl scale shows as drift and is undone", func(t *testing.T) {
		drift(t, []string{"scale", "-n", syncNS, "deployment/web", "--replicas=7"}, func(s syncService) bool {
			return s.SyncState == "drifted" && strings.Contains(s.SyncDetail, "7 replicas, git says 4")
		})
		if err := poll(ctx, 30*time.Second, replicas(4)); err != nil {
			t.Fatalf("the sync did not undo kubectl scale: %v", err)
		}
		if err := poll(ctx, 10*time.Second, func() error {
			if s := syncServices(t, env)["synctest:deployment/web"]; s.SyncState != "synced" {
				return fmt.Errorf("web is %s: %s", s.SyncState, s.SyncDetail)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})

	t.Run("kubectl set image shows the goal and is undone", func(t *testing.T) {
		drift(t, []string{"set", "image", "-n", syncNS, "deployment/web", "app=" + img + "1.2.0"}, func(s syncService) bool {
			return s.SyncState == "drifted" && len(s.Containers) == 1 && s.Containers[0].Image == img+"1.2.0" && s.Containers[0].Goal == img+"1.0.0"
		})
		out, _, _ := fluxctl(t, env, "list-services", "-n", syncNS)
		// The sync may have undone the drift already: then web's own row
		// says synced, running git's image.
		if !hasLine(out, "synctest:deployment/web", "drifted", img+"1.2.0", img+"1.0.0") && !hasLine(out, "synctest:deployment/web", "synced", img+"1.0.0") {
			t.Errorf("the table shows no GOAL beside the running image:\n%s", out)
		}
		if err := poll(ctx, 30*time.Second, func() error {
			d, err := kc.AppsV1().Deployments(syncNS).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != img+"1.0.0" {
				return fmt.Errorf("web runs %s", got)
			}
			return nil
		}); err != nil {
			t.Fatalf("the sync did not undo kubectl set image: %v", err)
		}
	})
	stopFluxd(t, f)
}

// TestSyncKustomizeOverlay syncs a kustomize overlay (a base shared with
// other overlays, a namespace, a name prefix and an images: entry) as
// 'kubectl apply -k' would, and releases its service through the
// overlay's images: entry: the base stays as it was, the overlay's
// comment is kept, the cluster runs the new image, and the next sync
// changes nothing.
func TestSyncKustomizeOverlay(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	const ns = "synckust"
	ctx := testContext(t)
	kc := kubeClient(t)
	t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	reg := stack.Registry + "/helloworld"
	base := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: app\n          image: " + reg + ":1.0.0\n"
	overlay := "# Production: the web tier.\nnamespace: " + ns + "\nnamePrefix: prod-\nresources:\n  - namespace.yaml\n  - ../base\nimages:\n  - name: " + reg + "\n    newTag: 1.1.0 # bumped by releases\n"
	pushManifest(t, "Add a kustomize overlay", map[string]string{
		"synckust/base/kustomization.yaml": "resources: [web.yaml]\n",
		"synckust/base/web.yaml":           base,
		"synckust/prod/namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
		"synckust/prod/kustomization.yaml": overlay,
	})
	f := startFaultFluxd(t, "sync-k", "synckust/prod", nil, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-sync-kust")
	t.Cleanup(func() {
		_ = kc.CoreV1().ConfigMaps("default").Delete(context.Background(), "fluxd-sync-kust", metav1.DeleteOptions{})
	})
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}
	image := func(want string) func() error {
		return func() error {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, "prod-web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
				return fmt.Errorf("prod-web runs %s", got)
			}
			return nil
		}
	}
	if err := poll(ctx, 60*time.Second, image(reg+":1.1.0")); err != nil {
		t.Fatalf("the overlay was not built and applied: %v\nlog: %s", err, stack.Log("sync-k"))
	}

	out, stderr, code := fluxctl(t, env, "release", "-y", "-s", ns+":deployment/prod-web", "-i", reg+":1.2.0")
	if code != 0 {
		t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
	}
	if err := poll(ctx, 30*time.Second, image(reg+":1.2.0")); err != nil {
		t.Fatalf("the release did not reach the cluster: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	want := strings.Replace(overlay, "newTag: 1.1.0 #", "newTag: 1.2.0 #", 1)
	if got := readTrimmed(t, filepath.Join(clone, "synckust/prod/kustomization.yaml")); got != strings.TrimSpace(want) {
		t.Errorf("the overlay in git after the release:\n%s\nwant:\n%s", got, want)
	}
	if got := readTrimmed(t, filepath.Join(clone, "synckust/base/web.yaml")); got != strings.TrimSpace(base) {
		t.Errorf("the release edited the base:\n%s", got)
	}
	out, stderr, code = fluxctl(t, env, "sync", "-o", "json")
	var s syncOut
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.action("Deployment/"+ns+"/prod-web") != "unchanged" {
		t.Errorf("the sync after the release changed the workload again (exit %d):\n%s%s", code, out, stderr)
	}
	stopFluxd(t, f)
}

// TestSyncOffSaysHowToTurnItOn: 'fluxctl sync' against a fluxd that does
// not sync fails, saying which flag turns it on.
func TestSyncOffSaysHowToTurnItOn(t *testing.T) {
	f := sharedFluxd(t)
	out, stderr, code := fluxctl(t, []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}, "sync")
	if code == 0 || !strings.Contains(stderr, "does not sync git to the cluster") || !strings.Contains(stderr, "--sync-interval") {
		t.Fatalf("sync on a fluxd without --sync-interval: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = fluxctl(t, []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}, "sync", "--dry-run")
	if code == 0 || !strings.Contains(stderr, "deployer") {
		t.Fatalf("sync as a viewer: exit %d\n%s%s", code, out, stderr)
	}
}
