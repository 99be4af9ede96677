package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/platform"
)

// TestSyncHonoursFluxV1Ignore: Flux v1's fluxcd.io/ignore, as its FAQ
// describes it, on the stack's API server. "true" in git: the object is
// not applied. "true" on the object in the cluster: git's changes to it
// are not applied, and it is not pruned when it leaves git. "sync_only":
// applied, but not pruned when it leaves git.
func TestSyncHonoursFluxV1Ignore(t *testing.T) {
	invNamespace(t)
	ctx := context.Background()
	kc := kubeClient(t)
	names := []string{"ign-git", "ign-live", "ign-synconly"}
	t.Cleanup(func() {
		for _, n := range names {
			_ = kc.CoreV1().ConfigMaps(invNS).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	a := newApplier(t, "ignore-inv", "file:///ignore.git branch main paths x")
	var stay []platform.Object
	for _, n := range []string{"ign-stays-1", "ign-stays-2", "ign-stays-3", "ign-stays-4", "ign-stays-5"} {
		stay = append(stay, configMapObject(n, nil)) // so that less than half of the inventory leaves git
		names = append(names, n)
	}
	byRef := func(res []platform.ObjectResult) map[string]platform.ObjectResult {
		m := map[string]platform.ObjectResult{}
		for _, r := range res {
			m[r.Ref.Name] = r
		}
		return m
	}
	first := []platform.Object{
		configMapObject("ign-git", map[string]any{"fluxcd.io/ignore": "true"}),
		configMapObject("ign-live", nil),
		configMapObject("ign-synconly", map[string]any{"fluxcd.io/ignore": "sync_only"}),
	}
	res, err := a.Apply(ctx, append(first, stay...), platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	got := byRef(res)
	if configMapExists(t, "ign-git") || got["ign-git"].Action != platform.ActionSkipped || !strings.Contains(got["ign-git"].Error, `fluxcd.io/ignore: "true" in git`) {
		t.Errorf("ign-git, ignored in git, was applied or not said so: %+v", got["ign-git"])
	}
	if !configMapExists(t, "ign-live") || !configMapExists(t, "ign-synconly") {
		t.Fatalf("ign-live and ign-synconly were not applied: %+v", res)
	}

	// Someone marks ign-live ignored in the cluster; git changes it.
	cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "ign-live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{"fluxcd.io/ignore": "true"}
	cm.Data = map[string]string{"a": "hand-made"}
	if _, err := kc.CoreV1().ConfigMaps(invNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := configMapObject("ign-live", nil)
	changed.Manifest["data"] = map[string]any{"a": "from git"}
	// The live metadata is watched: give the informer the update first.
	var live platform.ObjectResult
	if err := poll(ctx, 30*time.Second, func() error {
		res, err = a.Apply(ctx, append([]platform.Object{first[0], changed, first[2]}, stay...), platform.SyncOptions{Prune: true})
		if err != nil {
			return err
		}
		live = byRef(res)["ign-live"]
		if live.Action != platform.ActionSkipped {
			return fmt.Errorf("ign-live: %+v", live)
		}
		return nil
	}); err != nil {
		t.Fatalf("ign-live, ignored in the cluster, was not skipped: %v", err)
	}
	if !strings.Contains(live.Error, "on the object in the cluster") {
		t.Errorf("ign-live's skip does not say why: %+v", live)
	}
	if cm, err := kc.CoreV1().ConfigMaps(invNS).Get(ctx, "ign-live", metav1.GetOptions{}); err != nil || cm.Data["a"] != "hand-made" {
		t.Errorf("ign-live, ignored in the cluster, was changed by the sync: %v %v", cm.Data, err)
	}

	// Both leave git: neither is pruned.
	res, err = a.Apply(ctx, append([]platform.Object{first[0]}, stay...), platform.SyncOptions{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	got = byRef(res)
	for _, n := range []string{"ign-live", "ign-synconly"} {
		if !configMapExists(t, n) {
			t.Errorf("%s, annotated fluxcd.io/ignore in the cluster, was pruned: %+v", n, got[n])
		} else if !strings.Contains(got[n].Error, "not pruned: fluxcd.io/ignore") {
			t.Errorf("%s: not pruned, but the result does not say why: %+v", n, got[n])
		}
	}
}
