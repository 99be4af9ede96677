package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fluxd/fluxd/platform"
)

// A narrow unit test of what belongs to a workload's tree and how a pod's
// status is worded; TestStatusPageWorkloadInBrowser (e2e) shows the same
// tree from the real control plane.
func TestResourcesKeepOnlyTheWorkloadsOwn(t *testing.T) {
	owner := func(uid string) []metav1.OwnerReference { return []metav1.OwnerReference{{UID: types.UID(uid)}} }
	meta := func(name, uid string, refs []metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), OwnerReferences: refs}
	}
	two := int32(2)
	client := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: meta("web", "d1", nil)},
		&appsv1.Deployment{ObjectMeta: meta("other", "d2", nil)},
		&appsv1.ReplicaSet{ObjectMeta: meta("web-1", "rs1", owner("d1")), Spec: appsv1.ReplicaSetSpec{Replicas: &two,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "r/web:1"}}}}},
			Status: appsv1.ReplicaSetStatus{ReadyReplicas: 1}},
		&appsv1.ReplicaSet{ObjectMeta: meta("other-1", "rs2", owner("d2"))},
		&corev1.Pod{ObjectMeta: meta("web-1-a", "p1", owner("rs1")), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "r/web:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: false, RestartCount: 4,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}},
		&corev1.Pod{ObjectMeta: meta("other-1-a", "p2", owner("rs2"))},
		&corev1.Event{ObjectMeta: meta("e1", "e1", nil), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1-a", UID: "p1"}, Type: "Warning", Reason: "BackOff", Count: 3},
		&corev1.Event{ObjectMeta: meta("e2", "e2", nil), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "other-1-a", UID: "p2"}, Reason: "Pulled"},
	)
	c := newCluster(client, "test", Config{})
	id := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	got, err := c.Resources(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := &platform.Resources{
		Owned: []platform.Owned{{Kind: "ReplicaSet", Name: "web-1", Desired: 2, Ready: 1, Images: []string{"r/web:1"}}},
		Pods: []platform.Pod{{Name: "web-1-a", Owner: "web-1", Status: "CrashLoopBackOff", Restarts: 4, Node: "n1",
			Containers: []platform.PodContainer{{Name: "app", Image: "r/web:1", Restarts: 4, State: "waiting", Reason: "CrashLoopBackOff"}}}},
		Events: []platform.Event{{Object: "Pod/web-1-a", Type: "Warning", Reason: "BackOff", Count: 3}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	// Another workload's pod is not this one's to read.
	if _, err := c.PodLog(context.Background(), id, "other-1-a", platform.LogOptions{TailLines: 10, LimitBytes: 1024}); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("the log of another workload's pod: %v, want ErrNotFound", err)
	}
	if _, err := c.Resources(context.Background(), platform.ID{Namespace: "default", Kind: "deployment", Name: "gone"}); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("a workload not in the cluster: %v, want ErrNotFound", err)
	}
}

// The page's manifest view (Compare) writes nothing to the cluster, even
// for a workload an autoscaler targets whose replicas fluxd's apply still
// owns: a release hands spec.replicas over first, but a viewer's look at
// the diff must not (it is a dry run from end to end), and the diff still
// leaves the autoscaler's count alone.
func TestCompareAnAutoscaledWorkloadWritesNothing(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "default", "managedFields": []any{map[string]any{
			"manager": "fluxd", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}},
		}}},
		"spec": map[string]any{"replicas": int64(5)},
	}}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), live)
	var writes []string
	var applied map[string]any
	dyn.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchActionImpl)
		if len(p.PatchOptions.DryRun) == 0 {
			writes = append(writes, fmt.Sprintf("%s as %s: %s", p.PatchType, p.PatchOptions.FieldManager, p.Patch))
			return true, live, nil
		}
		if err := json.Unmarshal(p.Patch, &applied); err != nil {
			return true, nil, err
		}
		return true, &unstructured.Unstructured{Object: applied}, nil
	})
	client := fake.NewClientset(&autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}},
	})
	c := newCluster(client, "test", Config{})
	c.dynamic = dyn
	id := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	if _, err := c.Compare(context.Background(), id, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec: {replicas: 1}\n")); err != nil {
		t.Fatal(err)
	}
	if len(writes) > 0 {
		t.Errorf("comparing wrote to the cluster: %v", writes)
	}
	if r, _, _ := unstructured.NestedInt64(applied, "spec", "replicas"); r == 1 {
		t.Errorf("the dry run applied git's replicas (1); want the autoscaler's left alone")
	}
}
