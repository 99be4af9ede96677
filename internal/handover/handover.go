// Package handover is how fluxd lets go of a workload's spec.replicas
// when an HorizontalPodAutoscaler targets it, shared by the release's
// apply (platform/kube) and the sync's (platform/kube/sync).
//
// Both apply such a workload without spec.replicas. Server-side apply
// removes a field its last owner drops: if fluxd's apply owned
// spec.replicas (an apply from before the autoscaler existed, whose count
// the autoscaler has not changed since), dropping it would leave the
// field unset and the workload at one replica. So fluxd first applies the
// live count as Manager, which then co-owns the field and keeps it set.
package handover

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Manager is the field manager that keeps spec.replicas set at the
// autoscaler's count when fluxd lets go of it.
const Manager = "fluxd-autoscaler-handover"

// OwnsReplicas reports whether manager's apply owns spec.replicas.
func OwnsReplicas(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager != manager || f.Operation != metav1.ManagedFieldsOperationApply || f.FieldsV1 == nil {
			continue
		}
		var set map[string]json.RawMessage
		if json.Unmarshal(f.FieldsV1.Raw, &set) != nil {
			continue
		}
		var spec map[string]json.RawMessage
		if json.Unmarshal(set["f:spec"], &spec) != nil {
			continue
		}
		if _, ok := spec["f:replicas"]; ok {
			return true
		}
	}
	return false
}
