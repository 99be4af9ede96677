package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
	kubesync "github.com/fluxd/fluxd/platform/kube/sync"
)

// The applier tests drive platform/kube/sync directly against the
// stack's API server, in their own namespace and inventories.
const invNS = "syncinv"

func newApplier(t *testing.T, inventory, source string) *kubesync.Applier {
	t.Helper()
	if stack == nil {
		t.Skip("needs the local stack")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	a, err := kubesync.New(rc, kubesync.Config{InventoryNamespace: invNS, InventoryName: inventory, Source: source}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func invNamespace(t *testing.T) {
	t.Helper()
	kc := kubeClient(t)
	ctx := context.Background()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: invNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func configMapObject(name string, annotations map[string]any) platform.Object {
	md := map[string]any{"name": name, "namespace": invNS}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return platform.Object{File: name + ".yaml", Line: 1, Manifest: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"a": "b"},
	}}
}

func configMapExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := kubeClient(t).CoreV1().ConfigMaps(invNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSyncInventoryOfAnotherSourceIsNotPruned: two fluxd instances (two
// sources) given one inventory do not prune each other's objects; the
// second applies its own and reports the clash.
func TestSyncInventoryOfAnotherSourceIsNotPruned(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	a := newApplier(t, "shared-inv", "file:///a.git branch main paths x")
	b := newApplier(t, "shared-inv", "file:///b.git branch main paths y")
	if _, err := a.Apply(ctx, []platform.Object{configMapObject("of-a", nil)}, platform.SyncOptions{Prune: true}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Apply(ctx, []platform.Object{configMapObject("of-b", nil)}, platform.SyncOptions{Prune: true})
	if err == nil || !strings.Contains(err.Error(), "another source (file:///a.git branch main paths x)") {
		t.Errorf("b's sync = %v, want the inventory of another source reported", err)
	}
	if len(res) != 1 || res[0].Action != platform.ActionCreated {
		t.Errorf("b's results = %+v, want of-b created", res)
	}
	if !configMapExists(t, "of-a") || !configMapExists(t, "of-b") {
		t.Errorf("of-a exists: %v, of-b exists: %v; want both", configMapExists(t, "of-a"), configMapExists(t, "of-b"))
	}
	// a's own next sync, without of-a, still prunes it: the inventory is a's.
	if _, err := a.Apply(ctx, []platform.Object{configMapObject("of-a-2", nil)}, platform.SyncOptions{Prune: true}); err != nil {
		t.Fatal(err)
	}
	if configMapExists(t, "of-a") {
		t.Errorf("of-a survived its own source's prune")
	}
}

// TestSyncPruneSparesAdoptedObjectsAndNamespaces: an object that existed
// before git declared it (adopted) survives when it leaves git, unlike
// one the sync created; a Namespace the sync created survives too, unless
// annotated fluxd.io/prune: enabled.
func TestSyncPruneSparesAdoptedObjectsAndNamespaces(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	if _, err := kc.CoreV1().ConfigMaps(invNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pre-existing"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ns := func(name string, ann map[string]any) platform.Object {
		md := map[string]any{"name": name}
		if ann != nil {
			md["annotations"] = ann
		}
		return platform.Object{File: name + ".yaml", Line: 1, Manifest: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md}}
	}
	t.Cleanup(func() {
		for _, n := range []string{"syncinv-kept", "syncinv-optin"} {
			_ = kc.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	a := newApplier(t, "adopt-inv", "file:///adopt.git branch main paths x")
	first := []platform.Object{configMapObject("pre-existing", nil), configMapObject("created-by-sync", nil),
		ns("syncinv-kept", nil), ns("syncinv-optin", map[string]any{"fluxd.io/prune": "enabled"})}
	var stay []platform.Object
	for _, n := range []string{"stays-1", "stays-2", "stays-3", "stays-4"} {
		stay = append(stay, configMapObject(n, nil)) // so that less than half of the inventory leaves git
	}
	if _, err := a.Apply(ctx, append(first, stay...), platform.SyncOptions{Prune: true}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, stay, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if !configMapExists(t, "pre-existing") {
		t.Errorf("the adopted ConfigMap pre-existing was pruned; results %+v", res)
	}
	if configMapExists(t, "created-by-sync") {
		t.Errorf("the ConfigMap the sync created survived its prune; results %+v", res)
	}
	got, err := kc.CoreV1().Namespaces().Get(ctx, "syncinv-kept", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil {
		t.Errorf("the Namespace syncinv-kept was pruned without --sync-prune-namespaces (%v); results %+v", err, res)
	}
	if got, err := kc.CoreV1().Namespaces().Get(ctx, "syncinv-optin", metav1.GetOptions{}); err == nil && got.DeletionTimestamp == nil {
		t.Errorf("the Namespace syncinv-optin, annotated fluxd.io/prune: enabled, was not pruned; results %+v", res)
	}
}

// TestSyncLeavesReplicasToAnAutoscaler: a Deployment an
// HorizontalPodAutoscaler targets keeps the replicas it was scaled to
// (by hand here, as the autoscaler would: the stack has no metrics
// server) across syncs, and its result says it is autoscaled.
func TestSyncLeavesReplicasToAnAutoscaler(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	deploy := platform.Object{File: "web.yaml", Line: 1, Manifest: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "scaled", "namespace": invNS},
		"spec": map[string]any{"replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "scaled"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "scaled"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.invalid/app:1"}}}}},
	}}
	hpa := platform.Object{File: "hpa.yaml", Line: 1, Manifest: map[string]any{
		"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": map[string]any{"name": "scaled", "namespace": invNS},
		"spec": map[string]any{"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"}, "minReplicas": int64(1), "maxReplicas": int64(10),
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": int64(50)}}}}},
	}}
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments(invNS).Delete(context.Background(), "scaled", metav1.DeleteOptions{})
		_ = kc.AutoscalingV2().HorizontalPodAutoscalers(invNS).Delete(context.Background(), "scaled", metav1.DeleteOptions{})
	})
	a := newApplier(t, "hpa-inv", "file:///hpa.git branch main paths x")
	if _, err := a.Apply(ctx, []platform.Object{deploy, hpa}, platform.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	// The autoscaler scales it to 5 (through the scale subresource, as
	// the HPA controller does).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := kc.AppsV1().Deployments(invNS).GetScale(ctx, "scaled", metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = 5
		_, err = kc.AppsV1().Deployments(invNS).UpdateScale(ctx, "scaled", sc, metav1.UpdateOptions{FieldManager: "horizontal-pod-autoscaler"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, []platform.Object{deploy, hpa}, platform.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := kc.AppsV1().Deployments(invNS).Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := int32(-1); d.Spec.Replicas == nil || *d.Spec.Replicas != 5 {
		if d.Spec.Replicas != nil {
			got = *d.Spec.Replicas
		}
		t.Errorf("replicas after a sync = %d, want the autoscaler's 5 (results %+v)", got, res)
	}
	autoscaled := false
	for _, r := range res {
		if r.Ref.Kind == "Deployment" && r.Ref.Name == "scaled" {
			autoscaled = r.Autoscaled
		}
	}
	if !autoscaled {
		t.Errorf("the Deployment's result is not marked autoscaled: %+v", res)
	}
}

// TestSyncRefusesDeniedKindsAndItsInventory: git's ClusterRole (denied by
// default), its copies of the inventory's ConfigMaps (the first, and
// shards NAME-N, which the inventory does not have yet) and an object
// outside --sync-namespaces fail, are not applied, and the rest is.
func TestSyncRefusesDeniedKindsAndItsInventory(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	if stack == nil {
		t.Skip("needs the local stack")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kubesync.New(rc, kubesync.Config{InventoryNamespace: invNS, InventoryName: "deny-inv", Source: "file:///deny.git branch main paths x",
		Guard: gitguard.New(gitguard.Config{DenyKinds: gitguard.DefaultDenyKinds, Namespaces: []string{invNS}})}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	role := platform.Object{File: "role.yaml", Line: 1, Manifest: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "syncinv-everything"}, "rules": []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}}}
	outside := configMapObject("outside", nil)
	outside.Manifest["metadata"].(map[string]any)["namespace"] = "default"
	t.Cleanup(func() {
		_ = kc.RbacV1().ClusterRoles().Delete(context.Background(), "syncinv-everything", metav1.DeleteOptions{})
		_ = kc.CoreV1().ConfigMaps("default").Delete(context.Background(), "outside", metav1.DeleteOptions{})
	})
	res, err := a.Apply(ctx, []platform.Object{role, configMapObject("deny-inv", nil), configMapObject("deny-inv-1", nil), configMapObject("deny-inv-12", nil), outside, configMapObject("allowed", nil)}, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, r := range res {
		actions[r.Ref.Kind+"/"+r.Ref.Name] = r.Action
	}
	for _, name := range []string{"ClusterRole/syncinv-everything", "ConfigMap/deny-inv", "ConfigMap/deny-inv-1", "ConfigMap/deny-inv-12", "ConfigMap/outside"} {
		if actions[name] != platform.ActionFailed {
			t.Errorf("%s: %q, want failed (results %+v)", name, actions[name], res)
		}
	}
	if _, err := kc.RbacV1().ClusterRoles().Get(ctx, "syncinv-everything", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole git held was applied: %v", err)
	}
	if _, err := kc.CoreV1().ConfigMaps("default").Get(ctx, "outside", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap outside --sync-namespaces was applied: %v", err)
	}
	if !configMapExists(t, "allowed") {
		t.Errorf("the allowed ConfigMap was not applied: %+v", res)
	}
	for _, shard := range []string{"deny-inv-1", "deny-inv-12"} {
		if configMapExists(t, shard) {
			t.Errorf("git's copy of inventory shard %s was applied", shard)
		}
	}
	cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "deny-inv", metav1.GetOptions{})
	if err != nil || cm.Data["a"] == "b" {
		t.Errorf("the inventory ConfigMap = %v, %v; want fluxd's, not git's copy", cm, err)
	}
}

// TestSyncInventoryFailuresApplyWithoutPruning: an inventory that does
// not parse stops pruning, not the apply; an object of a kind the cluster
// does not know holds pruning back too (its key cannot be told).
func TestSyncInventoryFailuresApplyWithoutPruning(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	a := newApplier(t, "unknown-kind-inv", "file:///unknown.git branch main paths x")
	var keep []platform.Object
	for _, n := range []string{"uk-1", "uk-2", "uk-3"} {
		keep = append(keep, configMapObject(n, nil))
	}
	if _, err := a.Apply(ctx, append(keep, configMapObject("uk-leaves", nil)), platform.SyncOptions{Prune: true}); err != nil {
		t.Fatal(err)
	}
	unknown := platform.Object{File: "nope.yaml", Line: 1, Manifest: map[string]any{"apiVersion": "example.invalid/v1", "kind": "Nope", "metadata": map[string]any{"name": "n", "namespace": invNS}}}
	res, _ := a.Apply(ctx, append(keep, unknown), platform.SyncOptions{Prune: true})
	if !configMapExists(t, "uk-leaves") {
		t.Errorf("pruned while an object's kind was unknown: %+v", res)
	}

	if _, err := kc.CoreV1().ConfigMaps(invNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "broken-inv"}, Data: map[string]string{"objects.json": "not json"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b := newApplier(t, "broken-inv", "file:///broken.git branch main paths x")
	res, err := b.Apply(ctx, []platform.Object{configMapObject("despite-broken-inv", nil)}, platform.SyncOptions{Prune: true})
	if err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("sync with a broken inventory = %v, want it reported", err)
	}
	if !configMapExists(t, "despite-broken-inv") {
		t.Errorf("a broken inventory stopped the apply: %+v", res)
	}
}

// TestSyncTrustsNoInventoryShardItDidNotWrite: a shard NAME-N of a
// sharded inventory, rewritten outside fluxd to list an object fluxd
// adopted (it existed before git declared it) as prunable, does not get it
// pruned when it leaves git: fluxd reads no shard whose checksum, kept in
// the first ConfigMap, does not match what it wrote.
func TestSyncTrustsNoInventoryShardItDidNotWrite(t *testing.T) {
	if stack == nil {
		t.Skip("needs the local stack")
	}
	const ns, n = "syncinv-forge", 4000
	ctx := context.Background()
	kc := kubeClient(t)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	invNamespace(t)
	a := newApplier(t, "forged-inv", "file:///forged.git branch main paths x")
	t.Cleanup(a.Close)
	objs := make([]platform.Object, n)
	for i := range objs {
		name := fmt.Sprintf("an-object-of-an-inventory-with-a-forged-shard-%05d", i)
		objs[i] = platform.Object{File: "many.yaml", Line: i + 1, Manifest: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"i": fmt.Sprint(i)}}}
	}
	victim := platform.Object{File: "victim.yaml", Line: 1, Manifest: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "victim", "namespace": ns}, "data": map[string]any{"a": "changed by git"}}}
	res, err := a.Apply(ctx, append(objs, victim), platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultOf(res, "victim"); got != platform.ActionChanged {
		t.Fatalf("the object that existed before git declared it was %s, want adopted (configured)", got)
	}
	shards := inventoryShards(t, "forged-inv")
	if len(shards) < 2 {
		t.Fatalf("the inventory of %d objects is in %d ConfigMap(s): the test needs it sharded", n, len(shards))
	}
	// The forgery: the shard that lists the adopted object marks it
	// prunable; when that is the first (which git may not write), the
	// next shard, read after it, lists it again, prunable.
	entry := `"n":"victim"`
	forge := "forged-inv-1"
	for name := range shards {
		cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name != "forged-inv" && strings.Contains(cm.Data["entries.json"], entry) {
			forge = name
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, forge, metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw := cm.Data["entries.json"]
		if strings.Contains(raw, entry) {
			raw = strings.Replace(raw, entry, entry+`,"p":true`, 1)
		} else {
			raw = strings.TrimSuffix(raw, "]") + `,{"v":"v1","k":"ConfigMap","ns":"` + ns + `","n":"victim","p":true}]`
		}
		cm.Data["entries.json"] = raw
		_, err = kc.CoreV1().ConfigMaps(invNS).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The adopted object leaves git: an adopted object is forgotten, not
	// pruned.
	res, err = a.Apply(ctx, objs, platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultOf(res, "victim"); got != "(absent)" {
		t.Errorf("the adopted object the forged shard marked prunable was %s", got)
	}
	if _, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "victim", metav1.GetOptions{}); err != nil {
		t.Errorf("the adopted object the forged shard marked prunable is gone: %v", err)
	}
}
