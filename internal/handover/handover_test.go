package handover

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnsReplicas(t *testing.T) {
	t.Parallel()
	entry := func(manager string, op metav1.ManagedFieldsOperationType, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
	}
	for _, tc := range []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		want   bool
	}{
		{"fluxd's apply owns it", []metav1.ManagedFieldsEntry{entry("fluxd", metav1.ManagedFieldsOperationApply, `{"f:metadata":{},"f:spec":{"f:replicas":{},"f:template":{}}}`)}, true},
		{"fluxd's apply without it", []metav1.ManagedFieldsEntry{entry("fluxd", metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:template":{}}}`)}, false},
		{"another manager owns it", []metav1.ManagedFieldsEntry{entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`)}, false},
		{"an update by fluxd's name", []metav1.ManagedFieldsEntry{entry("fluxd", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:replicas":{}}}`)}, false},
		{"garbage", []metav1.ManagedFieldsEntry{entry("fluxd", metav1.ManagedFieldsOperationApply, `[`)}, false},
		{"none", nil, false},
	} {
		if got := OwnsReplicas(tc.fields, "fluxd"); got != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}
