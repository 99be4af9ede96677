package kubesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// A sync sends an object to the API server only when it changed in git
// since fluxd last applied it (its rendered form's digest differs from
// the inventory's), or in the cluster (its live copy, as the kind's
// metadata informer sees it, no longer matches the witness kept after
// that apply). Everything else is unchanged without a request, so a sync
// that finds nothing changed costs a read of the inventory and a list of
// the autoscalers, whatever the number of objects.
//
// What is left goes one of two ways:
//   - quick: the live copy is as fluxd left it (or absent) and only git
//     changed, so the outcome is known without a dry run: one apply,
//     whose answer is the new witness. Any error sends it the slow way.
//   - slow: everything else (drifted, never witnessed, a kind whose
//     informer is not ready, a CRD): fluxcd/pkg/ssa's read, dry run and
//     apply when it differs, as Flux v2 does for every object.

// change is how one item stands against the inventory and the cluster.
type change int

const (
	changeUnknown change = iota // no informer: dry-run it
	changeNone                  // neither git nor the cluster changed
	changeGit                   // only git changed, or it is absent
	changeLive                  // the cluster changed (or was never witnessed)
)

// generationKinds are the kinds whose metadata.generation moves on every
// change of their spec (and, for Deployments, of their annotations), so
// that a status update (their controller's, every few seconds) is told
// apart from an edit without reading the object. Other kinds are
// witnessed by resourceVersion alone: any update makes them be looked at
// again, and found unchanged.
var generationKinds = map[string]bool{
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true,
	"autoscaling/HorizontalPodAutoscaler": true, "policy/PodDisruptionBudget": true,
}

// digest is the digest of an item's rendered form, as it will be sent.
func digest(u *unstructured.Unstructured) string {
	b, err := json.Marshal(u.Object) // maps marshal with sorted keys
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// classify sets each item's digest and change, starting the informers of
// the kinds it meets.
func (a *Applier) classify(ctx context.Context, inv inventory, items []*item, ms *mappings) {
	keys := map[informerKey]bool{}
	for _, it := range items {
		it.digest = digest(it.u)
		it.change = changeUnknown
		if it.unscoped {
			continue
		}
		m, err := ms.of(it.u.GroupVersionKind())
		if err != nil {
			continue
		}
		it.informer = a.live.keyFor(m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, it.u.GetNamespace())
		it.watched = true
		keys[it.informer] = true
	}
	if len(keys) == 0 {
		return
	}
	ready := a.live.ensure(ctx, keys)
	for _, it := range items {
		inf, ok := ready[it.informer]
		if !it.watched || !ok {
			continue
		}
		live := get(inf, it.u.GetNamespace(), it.u.GetName())
		it.change = changeOf(inv.entries[it.key], it, live)
		if live != nil {
			if v, key := policy.FluxIgnore(live.GetAnnotations()); v == "true" {
				it.liveIgnore = key
			}
		}
	}
}

// changeOf compares an item with its entry and its live metadata (nil:
// absent).
func changeOf(e entry, it *item, live *metav1.PartialObjectMetadata) change {
	if live == nil {
		return changeGit // deleted, or never created: applying creates it
	}
	if e.Witness.UID == "" || live.UID != types.UID(e.Witness.UID) || live.DeletionTimestamp != nil || !witnessed(e.Witness, it, live) {
		return changeLive
	}
	if e.Digest == "" || e.Digest != it.digest {
		return changeGit
	}
	return changeNone
}

// witnessed reports whether live is as fluxd left it: the same
// resourceVersion, or, for a kind whose generation moves with its spec,
// the same generation and every label and annotation of git still there.
func witnessed(w witness, it *item, live *metav1.PartialObjectMetadata) bool {
	if live.ResourceVersion == w.RV {
		return true
	}
	gvk := it.u.GroupVersionKind()
	if !generationKinds[gvk.Group+"/"+gvk.Kind] || w.Gen == 0 || live.Generation != w.Gen {
		return false
	}
	return subset(it.u.GetLabels(), live.Labels) && subset(it.u.GetAnnotations(), live.Annotations)
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// quick applies the items only git changed, at once, and returns those
// that failed, to go the slow way. An item whose apply left its
// resourceVersion where the witness had it was unchanged after all.
//
// yield, when set, is asked before each object: once it says so, the
// objects not started are left (Action ""), and preempted is set.
func (a *Applier) quick(ctx context.Context, stage []*item, inv inventory, yield func() bool) (slow []*item, preempted bool) {
	var quick []*item
	for _, it := range stage {
		if it.change == changeGit && !ssautils.IsCRD(it.u) {
			quick = append(quick, it)
		} else if it.change != changeNone {
			slow = append(slow, it)
		}
	}
	var mu sync.Mutex
	var stop atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.cfg.Concurrency)
	for _, it := range quick {
		if stop.Load() {
			break
		}
		g.Go(func() error {
			if yield != nil && (stop.Load() || yield()) {
				stop.Store(true)
				return nil
			}
			applied := it.u.DeepCopy()
			err := a.c.Patch(gctx, applied, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager))
			if err != nil {
				mu.Lock()
				slow = append(slow, it)
				mu.Unlock()
				return nil
			}
			w := witnessOf(applied)
			prev := inv.entries[it.key].Witness
			switch {
			case prev.UID != w.UID && onlyManager(applied, FieldManager):
				// Created by this apply. One another manager wrote too
				// existed already (the informer had not seen it yet):
				// adopted, not created, so never pruned.
				it.res.Action = platform.ActionCreated
			case prev.UID != w.UID:
				it.res.Action = platform.ActionChanged
			case prev.RV != w.RV:
				it.res.Action = platform.ActionChanged
			default:
				it.res.Action = platform.ActionUnchanged
			}
			it.witness = w
			return nil
		})
	}
	_ = g.Wait()
	if stop.Load() {
		return nil, true
	}
	return slow, false
}

// onlyManager reports whether manager is the only one of o's fields.
func onlyManager(o metav1.Object, manager string) bool {
	for _, f := range o.GetManagedFields() {
		if f.Manager != manager {
			return false
		}
	}
	return true
}

func witnessOf(o metav1.Object) witness {
	return witness{UID: string(o.GetUID()), RV: o.GetResourceVersion(), Gen: o.GetGeneration()}
}

// witnesses records what the API server answered for each object during
// a sync: the last read and the last real apply, so that an object the
// slow way found unchanged, changed or created gets its witness without
// another request.
type witnesses struct {
	mu      sync.Mutex
	read    map[string]witness
	applied map[string]witness
}

func (w *witnesses) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.read, w.applied = map[string]witness{}, map[string]witness{}
}

// of is the witness of the object of key: its apply's, else its read's.
func (w *witnesses) of(key string) witness {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x, ok := w.applied[key]; ok {
		return x
	}
	return w.read[key]
}

func (w *witnesses) note(obj client.Object, applied bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetUID() == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.read == nil {
		w.read, w.applied = map[string]witness{}, map[string]witness{}
	}
	if applied {
		w.applied[keyOf(u)] = witnessOf(u)
	} else {
		w.read[keyOf(u)] = witnessOf(u)
	}
}

// interceptor functions for the sync's client: they note witnesses.
func (w *witnesses) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Get(ctx, key, obj, opts...)
	if err == nil {
		w.note(obj, false)
	}
	return err
}

func (w *witnesses) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Patch(ctx, obj, patch, opts...)
	if err == nil && patch.Type() == types.ApplyPatchType {
		po := &client.PatchOptions{}
		po.ApplyOptions(opts)
		if len(po.DryRun) == 0 {
			w.note(obj, true)
		}
	}
	return err
}
