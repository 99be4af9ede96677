package kube

import (
	"context"
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fluxd/fluxd/internal/handover"
	"github.com/fluxd/fluxd/platform"
)

// A workload an HorizontalPodAutoscaler targets has its replicas set by
// the autoscaler, not by git. A release applies it as the sync does
// (platform/kube/sync's leaveReplicasToAutoscalers): without
// spec.replicas, as the same field manager, so that neither resets the
// autoscaler's count, and the sync after a release finds nothing of
// fluxd's to take away.

// autoscaled reports whether an HorizontalPodAutoscaler in the cluster
// targets the workload. One fluxd may not list (no RBAC): then the
// workload's replicas are applied as git has them, as the sync does.
func (c *Cluster) autoscaled(ctx context.Context, id platform.ID) bool {
	if id.Kind != "deployment" && id.Kind != "statefulset" || c.client == nil {
		return false
	}
	hpas, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(id.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, h := range hpas.Items {
		ref := h.Spec.ScaleTargetRef
		if strings.EqualFold(ref.Kind, id.Kind) && ref.Name == id.Name {
			return true
		}
	}
	return false
}

// leaveReplicas drops spec.replicas from obj, first handing the field
// over (internal/handover) when fluxd's apply owns it in the cluster, so
// that it keeps its value.
func (c *Cluster) leaveReplicas(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	unstructured.RemoveNestedField(obj.Object, "spec", "replicas")
	live, err := c.dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return
	}
	replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	if !found || !handover.OwnsReplicas(live.GetManagedFields(), FieldManager) {
		return
	}
	patch, _ := json.Marshal(map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		"spec":     map[string]any{"replicas": replicas},
	})
	force := false
	_, _ = c.dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: handover.Manager, Force: &force})
}

// keepLiveReplicas is leaveReplicas for a dry run (the page's manifest
// diff): obj gets live's spec.replicas, or none when live has none, so
// that applying it leaves the autoscaler's count as it is, and nothing
// is written to hand the field over.
func keepLiveReplicas(obj, live *unstructured.Unstructured) {
	unstructured.RemoveNestedField(obj.Object, "spec", "replicas")
	if r, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); found {
		_ = unstructured.SetNestedField(obj.Object, r, "spec", "replicas")
	}
}
