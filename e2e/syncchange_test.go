package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/fluxd/fluxd/platform"
	kubesync "github.com/fluxd/fluxd/platform/kube/sync"
)

// resultOf is the action of the object named name in res.
func resultOf(res []platform.ObjectResult, name string) string {
	for _, r := range res {
		if r.Ref.Name == name {
			return r.Action + r.Error
		}
	}
	return "(absent)"
}

// syncUntil applies objs until each object of want has had its action
// in one of the syncs: a change made in the cluster reaches the sync's
// informers a moment later.
func syncUntil(t *testing.T, a *kubesync.Applier, objs []platform.Object, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	var res []platform.ObjectResult
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		res, err = a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
		for name, action := range want {
			if resultOf(res, name) == action {
				seen[name] = true
			}
		}
		return err == nil && len(seen) == len(want), err
	})
	if err != nil {
		t.Fatalf("the sync never reported all of %v (saw %v): %v; last results %+v", want, seen, err, res)
	}
}

// TestSyncCorrectsDriftWithoutAskingPerObject: a sync that finds nothing
// changed sends a few requests whatever the number of objects (here 60),
// and still corrects what a person changed by hand, recreates what a
// person deleted, and applies what git changed, and nothing else.
func TestSyncCorrectsDriftWithoutAskingPerObject(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	a := newApplier(t, "drift-inv", "file:///drift.git branch main paths x")
	t.Cleanup(a.Close)
	var objs []platform.Object
	for i := 0; i < 60; i++ {
		objs = append(objs, configMapObject(fmt.Sprintf("drift-%02d", i), nil))
	}
	deploy := platform.Object{File: "web.yaml", Line: 1, Manifest: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "drift-web", "namespace": invNS},
		"spec": map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "drift-web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "drift-web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.invalid/app:1"}}}}},
	}}
	objs = append(objs, deploy)
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments(invNS).Delete(context.Background(), "drift-web", metav1.DeleteOptions{})
		for i := 0; i < 60; i++ {
			_ = kc.CoreV1().ConfigMaps(invNS).Delete(context.Background(), fmt.Sprintf("drift-%02d", i), metav1.DeleteOptions{})
		}
	})
	if _, err := a.Apply(ctx, objs, platform.SyncOptions{Prune: true}); err != nil {
		t.Fatal(err)
	}

	// Nothing changed: every object unchanged, for a handful of requests.
	before := a.Requests()
	res, err := a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != platform.ActionUnchanged {
			t.Errorf("%s: %s %s, want unchanged", r.Ref, r.Action, r.Error)
		}
	}
	if n := a.Requests() - before; n > 5 {
		t.Errorf("a sync of %d unchanged objects sent %d requests, want at most 5 (the inventory, the autoscalers)", len(objs), n)
	}

	// A person edits a ConfigMap's data and the Deployment's image by
	// hand, and deletes another ConfigMap.
	cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "drift-07", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "edited by hand"
	if _, err := kc.CoreV1().ConfigMaps(invNS).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	// The Deployment's controller writes its status meanwhile: edit it
	// as kubectl edit does, again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := kc.AppsV1().Deployments(invNS).Get(ctx, "drift-web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/app:hand-edited"
		_, err = kc.AppsV1().Deployments(invNS).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CoreV1().ConfigMaps(invNS).Delete(ctx, "drift-13", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, a, objs, map[string]string{"drift-07": platform.ActionChanged, "drift-web": platform.ActionChanged, "drift-13": platform.ActionCreated})
	if cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "drift-07", metav1.GetOptions{}); err != nil || cm.Data["a"] != "b" {
		t.Errorf("drift-07 after the sync: %v, data %v; want a: b back", err, cm.Data)
	}
	if d, err := kc.AppsV1().Deployments(invNS).Get(ctx, "drift-web", metav1.GetOptions{}); err != nil || d.Spec.Template.Spec.Containers[0].Image != "registry.invalid/app:1" {
		t.Errorf("drift-web after the sync: %v, image %v; want git's registry.invalid/app:1 back", err, d.Spec.Template.Spec.Containers)
	}
	if !configMapExists(t, "drift-13") {
		t.Errorf("drift-13, deleted by hand, was not recreated")
	}

	// git changes one object: it alone is applied.
	changed := configMapObject("drift-21", map[string]any{"changed": "in git"})
	objs[21] = changed
	res, err = a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want := platform.ActionUnchanged
		if r.Ref.Name == "drift-21" {
			want = platform.ActionChanged
		}
		if r.Action != want {
			t.Errorf("after git changed drift-21: %s %s %s, want %s", r.Ref, r.Action, r.Error, want)
		}
	}
	if cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "drift-21", metav1.GetOptions{}); err != nil || cm.Annotations["changed"] != "in git" {
		t.Errorf("drift-21 after git changed it: %v, annotations %v", err, cm.Annotations)
	}
}

// TestSyncInventoryOverTenThousandObjectsStillPrunes: an inventory of
// 10,050 objects, over 1 MiB as one list (a ConfigMap's limit), is kept
// in shards each under it, and an object that leaves git is still pruned.
func TestSyncInventoryOverTenThousandObjectsStillPrunes(t *testing.T) {
	if stack == nil {
		t.Skip("needs the local stack")
	}
	const ns, n = "syncinv-big", 10050
	ctx := context.Background()
	kc := kubeClient(t)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	invNamespace(t)
	a := newApplier(t, "big-inv", "file:///big.git branch main paths x")
	t.Cleanup(a.Close)
	objs := make([]platform.Object, n)
	for i := range objs {
		name := fmt.Sprintf("an-object-of-a-big-inventory-%05d", i)
		objs[i] = platform.Object{File: "big.yaml", Line: i + 1, Manifest: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"i": fmt.Sprint(i)}}}
	}
	res, err := a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != platform.ActionCreated {
			t.Fatalf("%s: %s %s, want created", r.Ref, r.Action, r.Error)
		}
	}
	shards := inventoryShards(t, "big-inv")
	if len(shards) < 2 {
		t.Errorf("the inventory of %d objects is in %d ConfigMap(s), want it sharded", n, len(shards))
	}
	total, entries := 0, 0
	for name, size := range shards {
		total += size
		if size >= 1<<20 {
			t.Errorf("inventory shard %s holds %d bytes, over 1 MiB", name, size)
		}
	}
	entries = strings.Count(inventoryText(t, "big-inv"), `"n":"an-object-of-a-big-inventory-`)
	if entries != n {
		t.Errorf("the inventory lists %d objects, want %d", entries, n)
	}
	if total <= 1<<20 {
		t.Errorf("the inventory takes %d bytes in all: the test no longer passes 1 MiB", total)
	}

	// One object leaves git: pruned.
	gone := objs[4321].Ref().Name
	objs = append(objs[:4321], objs[4322:]...)
	res, err = a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultOf(res, gone); got != platform.ActionDeleted {
		t.Errorf("%s, which left git, was %s, want deleted", gone, got)
	}
	if _, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s is still in the cluster after the prune (%v)", gone, err)
	}
	if got := strings.Count(inventoryText(t, "big-inv"), `"n":"an-object-of-a-big-inventory-`); got != n-1 {
		t.Errorf("after the prune the inventory lists %d objects, want %d", got, n-1)
	}
}

// inventoryShards are the inventory's ConfigMaps (name → bytes of data).
func inventoryShards(t *testing.T, name string) map[string]int {
	t.Helper()
	list, err := kubeClient(t).CoreV1().ConfigMaps(invNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, cm := range list.Items {
		if cm.Name == name || strings.HasPrefix(cm.Name, name+"-") {
			size := 0
			for k, v := range cm.Data {
				size += len(k) + len(v)
			}
			out[cm.Name] = size
		}
	}
	return out
}

func inventoryText(t *testing.T, name string) string {
	t.Helper()
	list, err := kubeClient(t).CoreV1().ConfigMaps(invNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, cm := range list.Items {
		if cm.Name == name || strings.HasPrefix(cm.Name, name+"-") {
			for _, v := range cm.Data {
				b.WriteString(v)
			}
		}
	}
	return b.String()
}
