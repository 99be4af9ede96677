package kube

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fluxd/fluxd/platform"
)

// A narrow unit test of the cache and conversion; the end-to-end tests
// prove the same against the real control plane.
func TestWorkloadsFromCache(t *testing.T) {
	replicas := int32(3)
	client := fake.NewClientset(
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello", Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "r/init:1"}},
				Containers:     []corev1.Container{{Name: "hello", Image: "r/hello:1.0.0"}},
			}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
		},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "agent"}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(client, "fake", Config{Namespaces: []string{"default"}})
	c.Start(ctx)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Workloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []platform.Workload{{
		ID: platform.ID{Namespace: "default", Kind: "deployment", Name: "hello"},
		Containers: []platform.Container{
			{Name: "init", Image: "r/init:1", Init: true},
			{Name: "hello", Image: "r/hello:1.0.0"},
		},
		Status:     "ready",
		Replicas:   platform.Replicas{Desired: 3, Updated: 3, Ready: 3, Available: 3},
		Generation: 2, ObservedGeneration: 2,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Workloads (-want +got):\n%s", diff)
	}
}
