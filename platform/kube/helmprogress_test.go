package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fluxd/fluxd/platform"
)

// TestHelmReplicas: a HelmRelease's progress is the pods of the workloads
// its release installed, found by the labels and annotations Helm and
// its controllers write, never 0/0 when they are in view, and never
// another release's.
func TestHelmReplicas(t *testing.T) {
	t.Parallel()
	hr := func(apiVersion, ns, name string, spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "HelmRelease",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     spec,
		}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	owned := func(ns string, labels, ann map[string]string, desired, ready int32) *helmOwned {
		return helmOwner(&metav1.ObjectMeta{Namespace: ns, Name: "x", Labels: labels, Annotations: ann},
			platform.Replicas{Desired: desired, Updated: desired, Ready: ready, Available: ready})
	}
	helm3 := func(ns, release string) map[string]string {
		return map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}
	}
	byController := map[string]string{"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "flux-system", "app.kubernetes.io/managed-by": "Helm"}
	workloads := []*helmOwned{
		owned("apps", nil, helm3("apps", "web"), 2, 1),               // release web in apps
		owned("apps", nil, helm3("apps", "web"), 1, 1),               // a second workload of it
		owned("apps", nil, helm3("apps", "other"), 5, 5),             // another release
		owned("prod", byController, helm3("prod", "prod-web"), 3, 3), // installed for flux-system/web into prod
		owned("legacy", map[string]string{"app.kubernetes.io/instance": "legacy-old", "app.kubernetes.io/managed-by": "Tiller"}, nil, 4, 2),
		owned("apps", map[string]string{"app.kubernetes.io/instance": "web"}, nil, 7, 7), // not Helm's
	}
	for _, tc := range []struct {
		name string
		in   *unstructured.Unstructured
		want platform.Replicas
	}{
		{"helm-controller/release named after the HelmRelease: meta.helm.sh annotations",
			hr("helm.toolkit.fluxcd.io/v2", "apps", "web", map[string]any{}, nil),
			platform.Replicas{Desired: 3, Updated: 3, Ready: 2, Available: 2}},
		{"helm-controller/spec.releaseName",
			hr("helm.toolkit.fluxcd.io/v2beta1", "apps", "frontend", map[string]any{"releaseName": "other"}, nil),
			platform.Replicas{Desired: 5, Updated: 5, Ready: 5, Available: 5}},
		{"helm-controller/targetNamespace: its labels name the HelmRelease, counted once",
			hr("helm.toolkit.fluxcd.io/v2", "flux-system", "web", map[string]any{"targetNamespace": "prod"}, nil),
			platform.Replicas{Desired: 3, Updated: 3, Ready: 3, Available: 3}},
		{"helm-operator/Flux v1 default release name namespace-name, Helm 2 labels",
			hr("helm.fluxcd.io/v1", "legacy", "old", map[string]any{}, nil),
			platform.Replicas{Desired: 4, Updated: 4, Ready: 2, Available: 2}},
		{"helm-operator/status.releaseName wins",
			hr("helm.fluxcd.io/v1", "apps", "x", map[string]any{}, map[string]any{"releaseName": "other"}),
			platform.Replicas{Desired: 5, Updated: 5, Ready: 5, Available: 5}},
		{"a release with nothing in view is 0/0",
			hr("helm.toolkit.fluxcd.io/v2", "apps", "none", map[string]any{}, nil),
			platform.Replicas{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, helmReplicas(helmReleaseKeys(tc.in), workloads)); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
		})
	}
}
