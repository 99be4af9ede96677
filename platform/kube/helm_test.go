package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fluxd/fluxd/platform"
)

// TestFromHelmRelease: a HelmRelease has rolled out when its controller
// says Ready (Flux v1: Released) at its generation, and is stuck when it
// says False there; its containers are its values' images.
func TestFromHelmRelease(t *testing.T) {
	t.Parallel()
	hr := func(apiVersion string, gen int64, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "HelmRelease",
			"metadata": map[string]any{"name": "web", "namespace": "apps", "generation": gen,
				"annotations": map[string]any{"repository.fluxcd.io/side": "side.repo"}},
			"spec": map[string]any{"values": map[string]any{
				"image": map[string]any{"repository": "reg/web", "tag": "1.2"},
				"side":  map[string]any{"repo": "reg/side:3"},
			}},
		}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	cond := func(typ, st string, gen int64) map[string]any {
		return map[string]any{"observedGeneration": gen, "conditions": []any{map[string]any{"type": typ, "status": st, "reason": "R", "message": "m", "observedGeneration": gen}}}
	}
	for _, tc := range []struct {
		name            string
		in              *unstructured.Unstructured
		status, stuck   string
		observed        int64
		rolledOutAtGen2 bool
	}{
		{name: "no status: nothing reported", in: hr("helm.toolkit.fluxcd.io/v2", 2, nil), status: "updating"},
		{name: "Ready at an older generation", in: hr("helm.toolkit.fluxcd.io/v2", 2, cond("Ready", "True", 1)), status: "updating", observed: 1},
		{name: "Ready at the generation", in: hr("helm.toolkit.fluxcd.io/v2", 2, cond("Ready", "True", 2)), status: "ready", observed: 2, rolledOutAtGen2: true},
		{name: "Ready False at the generation is stuck", in: hr("helm.toolkit.fluxcd.io/v2", 2, cond("Ready", "False", 2)), status: "updating", observed: 2, stuck: "its Ready condition is False: R: m"},
		{name: "fluxv1 Released at the generation", in: hr("helm.fluxcd.io/v1", 2, cond("Released", "True", 2)), status: "ready", observed: 2, rolledOutAtGen2: true},
		{name: "fluxv1 Ready is not its condition", in: hr("helm.fluxcd.io/v1", 2, cond("Ready", "True", 2)), status: "updating", observed: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := fromHelmRelease(tc.in)
			want := platform.Workload{
				ID:         platform.ID{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "web"},
				Containers: []platform.Container{{Name: "chart-image", Image: "reg/web:1.2"}, {Name: "side", Image: "reg/side:3"}},
				Status:     tc.status, Stuck: tc.stuck, Generation: 2, ObservedGeneration: tc.observed,
			}
			if diff := cmp.Diff(want, w); diff != "" {
				t.Errorf("fromHelmRelease (-want +got):\n%s", diff)
			}
			if got := w.RolledOut(2); got != tc.rolledOutAtGen2 {
				t.Errorf("RolledOut(2) = %v, want %v", got, tc.rolledOutAtGen2)
			}
		})
	}
}

// A cluster without the HelmRelease CRD lists its workloads as before
// and watches no HelmRelease; once the CRD is served, the next discovery
// watches them and they are listed. (Narrow: fake clients; the e2e test
// TestHelmReleases runs it on the real control plane.)
func TestHelmReleaseCRDAbsentThenServed(t *testing.T) {
	client := fake.NewClientset(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}})
	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     map[string]any{"values": map[string]any{"image": "reg/web:1"}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{
			{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}: "HelmReleaseList",
			{Group: "helm.fluxcd.io", Version: "v1", Resource: "helmreleases"}:         "HelmReleaseList",
		}, hr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(client, "fake", Config{Namespaces: []string{"default"}})
	c.dynamic = dyn
	c.Start(ctx)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		ws, err := c.Workloads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, w.ID.String())
		}
		return out
	}
	if c.discoverHelm(ctx, c.namespaces, 0) {
		t.Fatal("discovery says HelmReleases are served, with no CRD")
	}
	if diff := cmp.Diff([]string{"default:deployment/hello"}, ids()); diff != "" {
		t.Errorf("without the CRD, Workloads (-want +got):\n%s", diff)
	}
	client.Resources = append(client.Resources, &metav1.APIResourceList{
		GroupVersion: "helm.toolkit.fluxcd.io/v2",
		APIResources: []metav1.APIResource{{Name: "helmreleases", Namespaced: true, Kind: "HelmRelease"}},
	})
	c.discoverHelm(ctx, c.namespaces, 0)
	want := []string{"default:deployment/hello", "default:helmrelease/web"}
	deadline := time.Now().Add(10 * time.Second)
	for diff := cmp.Diff(want, ids()); diff != ""; diff = cmp.Diff(want, ids()) {
		if time.Now().After(deadline) {
			t.Fatalf("with the CRD served, Workloads (-want +got):\n%s", diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServedVersion: fluxd watches HelmReleases at the version the API
// server prefers for their group, a version it has no name for included
// (Flux moved helm.toolkit.fluxcd.io from v2beta1 to v2beta2 to v2), and
// else at the first it knows that is served.
func TestServedVersion(t *testing.T) {
	t.Parallel()
	served := func(versions ...string) *fake.Clientset {
		client := fake.NewClientset()
		for _, v := range versions {
			client.Resources = append(client.Resources, &metav1.APIResourceList{
				GroupVersion: "helm.toolkit.fluxcd.io/" + v,
				APIResources: []metav1.APIResource{{Name: "helmreleases", Namespaced: true, Kind: "HelmRelease"}},
			})
		}
		return client
	}
	known := []string{"v2", "v2beta2", "v2beta1"}
	for _, tc := range []struct {
		name   string
		served []string
		want   string
	}{
		{"flux 2.0: v2beta1 only", []string{"v2beta1"}, "v2beta1"},
		{"flux 2.2: v2beta2 preferred, v2beta1 still served", []string{"v2beta2", "v2beta1"}, "v2beta2"},
		{"flux 2.3: v2 preferred", []string{"v2", "v2beta2", "v2beta1"}, "v2"},
		{"a version fluxd has no name for, preferred by the server", []string{"v3", "v2"}, "v3"},
		{"none served", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(served(tc.served...), "fake", Config{Namespaces: []string{"default"}})
			if got := servedVersion(c, "helm.toolkit.fluxcd.io", known); got != tc.want {
				t.Errorf("servedVersion = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHelmControllerAbsent: fluxd says no Helm controller runs only when
// it can list pods and none labelled as Flux's helm-controller or Flux
// v1's helm-operator is running.
func TestHelmControllerAbsent(t *testing.T) {
	t.Parallel()
	pod := func(ns string, labels map[string]string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name   string
		pods   []runtime.Object
		absent bool
	}{
		{"no pods", nil, true},
		{"flux install: app=helm-controller in flux-system", []runtime.Object{pod("flux-system", map[string]string{"app": "helm-controller"}, corev1.PodRunning)}, false},
		{"flux operator: app.kubernetes.io/component=helm-controller", []runtime.Object{pod("flux", map[string]string{"app.kubernetes.io/component": "helm-controller"}, corev1.PodRunning)}, false},
		{"flux v1: app=helm-operator", []runtime.Object{pod("fluxcd", map[string]string{"app": "helm-operator"}, corev1.PodPending)}, false},
		{"a failed helm-controller pod is none", []runtime.Object{pod("flux-system", map[string]string{"app": "helm-controller"}, corev1.PodFailed)}, true},
		{"other controllers only", []runtime.Object{pod("flux-system", map[string]string{"app": "source-controller"}, corev1.PodRunning)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(fake.NewClientset(tc.pods...), "fake", Config{Namespaces: []string{"default"}})
			got, err := c.HelmControllerAbsent(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if (got != "") != tc.absent {
				t.Errorf("HelmControllerAbsent = %q, want absent %v", got, tc.absent)
			}
		})
	}
}

// Where fluxd may not list pods in every namespace (deploy/rbac.yaml binds
// per namespace), it cannot tell, and says so rather than "absent".
func TestHelmControllerAbsentForbidden(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no ClusterRoleBinding"))
	})
	c := newCluster(client, "fake", Config{Namespaces: []string{"default"}})
	if why, err := c.HelmControllerAbsent(context.Background()); err == nil || why != "" {
		t.Errorf("HelmControllerAbsent = %q, %v; want an error saying it cannot tell", why, err)
	}
}
