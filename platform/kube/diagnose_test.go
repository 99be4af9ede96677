package kube

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fluxd/fluxd/platform"
)

// A crash loop caught between a container's exit and the kubelet's next
// back-off is said to be one: the exit, and how often it restarted.
func TestDiagnoseSaysACrashLoopCaughtBetweenRestarts(t *testing.T) {
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	pod := func(name string, restarts int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: restarts,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}}
	}
	for _, tc := range []struct {
		restarts int32
		want     string
	}{
		{0, "pod web-1: container app exited with code 3: Error"},
		{2, "pod web-1: container app exited with code 3: Error (restarted 2 times)"},
	} {
		c := newCluster(fake.NewClientset(dep, pod("web-1", tc.restarts)), "fake", Config{Namespaces: []string{"default"}})
		got := c.Diagnose(context.Background(), platform.ID{Namespace: "default", Kind: "deployment", Name: "web"})
		if !strings.Contains(got, tc.want) || (tc.restarts == 0 && strings.Contains(got, "restarted")) {
			t.Errorf("%d restarts: %q, want %q", tc.restarts, got, tc.want)
		}
	}
}
