package kubesync

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxd/fluxd/internal/handover"
)

// scalable are the kinds whose spec.replicas an HorizontalPodAutoscaler
// sets, by group/kind.
var scalable = map[string]bool{"apps/Deployment": true, "apps/StatefulSet": true, "apps/ReplicaSet": true}

// leaveReplicasToAutoscalers drops spec.replicas from every workload of
// items an HorizontalPodAutoscaler targets (one in git, or one in the
// cluster), so that the sync does not undo the autoscaler's scaling on
// every run, as Flux's documentation advises doing by hand. It marks their
// results Autoscaled. An HPA the sync cannot list (no RBAC) is not seen:
// its workload's replicas are applied as git has them.
func (a *Applier) leaveReplicasToAutoscalers(ctx context.Context, items []*item, dryRun bool) {
	targets := map[string]bool{}
	for _, it := range items {
		if it.u.GroupVersionKind().Group == "autoscaling" && it.u.GetKind() == "HorizontalPodAutoscaler" {
			kind, _, _ := unstructured.NestedString(it.u.Object, "spec", "scaleTargetRef", "kind")
			name, _, _ := unstructured.NestedString(it.u.Object, "spec", "scaleTargetRef", "name")
			targets[it.u.GetNamespace()+"/"+kind+"/"+name] = true
		}
	}
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := a.c.List(ctx, &hpas); err != nil {
		a.log.Debug("listing HorizontalPodAutoscalers failed: workloads' replicas are applied as git has them", "error", err)
	}
	for _, h := range hpas.Items {
		targets[h.Namespace+"/"+h.Spec.ScaleTargetRef.Kind+"/"+h.Spec.ScaleTargetRef.Name] = true
	}
	if len(targets) == 0 {
		return
	}
	for _, it := range items {
		gvk := it.u.GroupVersionKind()
		if !scalable[gvk.Group+"/"+gvk.Kind] || !targets[it.u.GetNamespace()+"/"+gvk.Kind+"/"+it.u.GetName()] {
			continue
		}
		if !dryRun {
			a.handOverReplicas(ctx, it.u)
		}
		unstructured.RemoveNestedField(it.u.Object, "spec", "replicas")
		it.res.Autoscaled = true
	}
}

// handOverReplicas keeps spec.replicas set at its live count when the
// sync lets go of it while owning it (internal/handover).
func (a *Applier) handOverReplicas(ctx context.Context, u *unstructured.Unstructured) {
	if u.GetNamespace() == "" {
		return
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	if err := a.c.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		return
	}
	replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	if !found || !handover.OwnsReplicas(live.GetManagedFields(), FieldManager) {
		return
	}
	keep := &unstructured.Unstructured{}
	keep.SetGroupVersionKind(u.GroupVersionKind())
	keep.SetNamespace(u.GetNamespace())
	keep.SetName(u.GetName())
	_ = unstructured.SetNestedField(keep.Object, replicas, "spec", "replicas")
	if err := a.c.Patch(ctx, keep, client.Apply, client.FieldOwner(handover.Manager)); err != nil {
		a.log.Warn("handing spec.replicas over to the autoscaler failed: the workload may fall to one replica until the autoscaler scales it", "object", u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName(), "error", err)
	}
}
