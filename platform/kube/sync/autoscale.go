package kubesync

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
func (a *Applier) leaveReplicasToAutoscalers(ctx context.Context, items []*item) {
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
		unstructured.RemoveNestedField(it.u.Object, "spec", "replicas")
		it.res.Autoscaled = true
	}
}
