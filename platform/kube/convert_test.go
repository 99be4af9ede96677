package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/platform"
)

// A rollout's progress counts new pods only: three old ready pods and one
// new one starting are "1/3 updated, 0 ready", never "3 ready".
func TestRolloutProgressCountsUpdatedPodsOnly(t *testing.T) {
	three := int32(3)
	meta := metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 2}
	for _, tc := range []struct {
		name string
		got  platform.Workload
		want platform.Replicas
	}{
		{"deployment, surge pod starting", fromDeployment(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}}),
			platform.Replicas{Desired: 3, Updated: 1, Ready: 0, Available: 0}},
		{"deployment, one new pod ready", fromDeployment(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3}}),
			platform.Replicas{Desired: 3, Updated: 2, Ready: 1, Available: 1}},
		{"deployment, rolled out", fromDeployment(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}),
			platform.Replicas{Desired: 3, Updated: 3, Ready: 3, Available: 3}},
		{"statefulset, one pod replaced", fromStatefulSet(&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &three},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}}),
			platform.Replicas{Desired: 3, Updated: 1, Ready: 0, Available: 0}},
		{"daemonset, one node updated", fromDaemonSet(&appsv1.DaemonSet{ObjectMeta: meta,
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberReady: 3, NumberAvailable: 3}}),
			platform.Replicas{Desired: 3, Updated: 1, Ready: 1, Available: 1}},
	} {
		if diff := cmp.Diff(tc.want, tc.got.Replicas); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if tc.want.Updated < 3 && tc.got.Status == "ready" {
			t.Errorf("%s: a workload mid-rollout is %q", tc.name, tc.got.Status)
		}
	}
}
