package kubesync

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fluxd/fluxd/platform"
)

func TestFieldDiffLeavesServerFieldsOut(t *testing.T) {
	t.Parallel()
	live := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "resourceVersion": "7", "generation": int64(3), "managedFields": []any{"x"}},
		"spec":     map[string]any{"replicas": int64(7)},
		"status":   map[string]any{"readyReplicas": int64(7)},
	}
	merged := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "resourceVersion": "8", "generation": int64(4)},
		"spec":     map[string]any{"replicas": int64(4), "paused": true},
		"status":   map[string]any{"readyReplicas": int64(1)},
	}
	want := []string{"add /spec/paused: true", "replace /spec/replicas: 4"}
	if diff := cmp.Diff(want, fieldDiff(live, merged)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInventoryAfterKeepsWhatExists(t *testing.T) {
	t.Parallel()
	ref := func(kind, name string) platform.ObjectRef {
		return platform.ObjectRef{APIVersion: "v1", Kind: kind, Namespace: "ns", Name: name}
	}
	mk := func(r platform.ObjectRef, action string) *item {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(r.APIVersion)
		u.SetKind(r.Kind)
		u.SetNamespace(r.Namespace)
		u.SetName(r.Name)
		return &item{u: u, key: keyOf(u), res: &platform.ObjectResult{Ref: r, Action: action}}
	}
	old := newInventory()
	for _, n := range []string{"updated-but-failed", "left-git", "listed-changed"} {
		old.entries[refKey(ref("ConfigMap", n))] = entry{Ref: ref("ConfigMap", n), Prune: true}
	}
	optIn := mk(ref("ConfigMap", "adopted-opted-in"), platform.ActionUnchanged)
	optIn.u.SetAnnotations(map[string]string{platform.AnnotationPrune: "enabled"})
	items := []*item{
		mk(ref("ConfigMap", "created"), platform.ActionCreated),
		mk(ref("ConfigMap", "never-created"), platform.ActionFailed),
		mk(ref("ConfigMap", "updated-but-failed"), platform.ActionFailed),
		mk(ref("ConfigMap", "adopted-changed"), platform.ActionChanged),
		mk(ref("ConfigMap", "adopted-unchanged"), platform.ActionUnchanged),
		mk(ref("ConfigMap", "listed-changed"), platform.ActionChanged),
		optIn,
	}
	got := inventoryAfter(old, items, []entry{old.entries[refKey(ref("ConfigMap", "left-git"))]})
	var names []string
	for _, e := range got.entries {
		if e.Prune {
			names = append(names, e.Ref.Name)
		}
	}
	// Adopted objects are listed, with their digests, but not prunable.
	want := []string{"adopted-opted-in", "created", "left-git", "listed-changed", "updated-but-failed"}
	if diff := cmp.Diff(want, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
}

// TestPruneHeldBackWhenMostLeavesGit: an empty git, or more than half of
// the inventory leaving at once, deletes nothing unless PruneAll; the
// entries stay listed. The check comes before any request to the cluster.
func TestPruneHeldBackWhenMostLeavesGit(t *testing.T) {
	t.Parallel()
	ref := func(name string) platform.ObjectRef {
		return platform.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	inv := newInventory()
	for _, n := range []string{"a", "b", "c"} {
		inv.entries[refKey(ref(n))] = entry{Ref: ref(n), Prune: true}
	}
	// An adopted entry that left git is not fluxd's to prune: it does
	// not count.
	inv.entries[refKey(ref("adopted"))] = entry{Ref: ref("adopted")}
	one := &unstructured.Unstructured{}
	one.SetAPIVersion("v1")
	one.SetKind("ConfigMap")
	one.SetNamespace("ns")
	one.SetName("a")
	stillA := []*item{{u: one, key: keyOf(one), res: &platform.ObjectResult{Ref: ref("a")}}}
	for name, items := range map[string][]*item{"git empty": nil, "two of three left": stillA} {
		a := &Applier{cfg: Config{}}
		res, keep, held := a.prune(context.Background(), inv, items, nil, platform.SyncOptions{Prune: true})
		if held == nil || !strings.Contains(held.Error(), "--sync-prune-all") || len(res) != 0 {
			t.Errorf("%s: prune = %v, %v; want it held back, naming --sync-prune-all", name, res, held)
		}
		if want := 3 - len(items); len(keep) != want {
			t.Errorf("%s: kept %d entries, want %d", name, len(keep), want)
		}
	}
}

// Flux v2's image automation objects, kept in git by a repository moved
// to fluxd, are skipped with the reason where the cluster does not serve
// their API group; any other kind the cluster does not know still fails
// the sync, and so does any other error on them.
func TestFluxV2ImageObjectsWithoutTheirCRDsAreSkipped(t *testing.T) {
	obj := func(apiVersion, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName("app")
		return u
	}
	noMatch := func(u *unstructured.Unstructured) error {
		gvk := u.GroupVersionKind()
		return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	for _, kind := range []string{"ImageRepository", "ImagePolicy", "ImageUpdateAutomation"} {
		for _, v := range []string{"v1beta2", "v1"} {
			u := obj("image.toolkit.fluxcd.io/"+v, kind)
			if why := readByFluxd(u, noMatch(u)); !strings.Contains(why, "Flux v2's image controllers are not installed") {
				t.Errorf("%s %s without its CRD: %q, want it skipped with the reason", v, kind, why)
			}
		}
	}
	other := obj("example.com/v1", "Widget")
	if why := readByFluxd(other, noMatch(other)); why != "" {
		t.Errorf("an unknown kind of another group is skipped (%q): it must fail the sync", why)
	}
	ip := obj("image.toolkit.fluxcd.io/v1", "ImagePolicy")
	if why := readByFluxd(ip, errors.New("admission webhook denied it")); why != "" {
		t.Errorf("an ImagePolicy refused for another reason is skipped (%q): it must fail the sync", why)
	}
	if why := readByFluxd(ip, nil); why != "" {
		t.Errorf("an ImagePolicy applied is skipped (%q)", why)
	}
}

// countingMapper answers RESTMapping for Deployments and counts the
// questions; other kinds are unknown.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.asked++
	if gk.Kind != "Deployment" {
		return nil, &meta.NoKindMatchError{GroupKind: gk}
	}
	return &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Scope: meta.RESTScopeNamespace}, nil
}

// One apply asks the mapper once per kind it knows, and again each time
// for a kind it does not know yet (a CRD of the same sync may bring it).
func TestMappingsAskOncePerKnownKind(t *testing.T) {
	m := &countingMapper{}
	ms := &mappings{m: m}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	for range 3 {
		if got, err := ms.of(deploy); err != nil || got.Resource.Resource != "deployments" {
			t.Fatalf("deployments: %v %v", got, err)
		}
		if _, err := ms.of(widget); err == nil {
			t.Fatal("an unknown kind was answered")
		}
	}
	if m.asked != 4 {
		t.Errorf("the mapper was asked %d times; want once for the known kind and each time for the unknown one (4)", m.asked)
	}
}
