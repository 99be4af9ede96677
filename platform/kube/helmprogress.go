package kube

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fluxd/fluxd/platform"
)

// A HelmRelease's progress is its release's own workloads' pods: the
// Deployments, StatefulSets and DaemonSets Helm installed for it, summed.
// They are found by what Helm and the controllers write on them:
//   - helm-controller's labels helm.toolkit.fluxcd.io/name and
//     helm.toolkit.fluxcd.io/namespace, naming the HelmRelease object;
//   - Helm 3's annotations meta.helm.sh/release-name and
//     meta.helm.sh/release-namespace, naming the release;
//   - for Helm 2 (Flux v1's helm-operator), the chart convention
//     app.kubernetes.io/instance with app.kubernetes.io/managed-by Helm
//     or Tiller.
// A release whose workloads are in a namespace fluxd does not watch shows
// 0/0, as before.

// helmKey names a release a workload belongs to: by "hr" (the
// HelmRelease object's namespace and name) or "release" (the Helm
// release's namespace and name).
type helmKey struct{ by, namespace, name string }

// helmOwned is one workload installed by a Helm release.
type helmOwned struct {
	keys     []helmKey
	replicas platform.Replicas
}

// helmOwner is what obj says of the release it belongs to; nil when it
// says nothing.
func helmOwner(obj metav1.Object, r platform.Replicas) *helmOwned {
	var keys []helmKey
	labels, ann := obj.GetLabels(), obj.GetAnnotations()
	if n := labels["helm.toolkit.fluxcd.io/name"]; n != "" {
		keys = append(keys, helmKey{"hr", or(labels["helm.toolkit.fluxcd.io/namespace"], obj.GetNamespace()), n})
	}
	if n := ann["meta.helm.sh/release-name"]; n != "" {
		keys = append(keys, helmKey{"release", or(ann["meta.helm.sh/release-namespace"], obj.GetNamespace()), n})
	}
	if n := labels["app.kubernetes.io/instance"]; n != "" && slices.Contains([]string{"Helm", "Tiller"}, labels["app.kubernetes.io/managed-by"]) {
		keys = append(keys, helmKey{"release", obj.GetNamespace(), n})
	}
	if len(keys) == 0 {
		return nil
	}
	return &helmOwned{keys: keys, replicas: r}
}

// helmReleaseKeys are the keys of HelmRelease u's workloads: the object
// itself, and its release's name and namespace as its controller names
// them (helm-controller: spec.releaseName, else [targetNamespace-]name;
// Flux v1's helm-operator: status.releaseName, spec.releaseName, else
// namespace-name).
func helmReleaseKeys(u *unstructured.Unstructured) []helmKey {
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, path...)
		return s
	}
	target := str("spec", "targetNamespace")
	ns := or(target, u.GetNamespace())
	name := str("spec", "releaseName")
	if u.GroupVersionKind().Group == "helm.fluxcd.io" {
		name = or(str("status", "releaseName"), name, ns+"-"+u.GetName())
	} else if name == "" {
		name = u.GetName()
		if target != "" {
			name = target + "-" + u.GetName()
		}
	}
	return []helmKey{{"hr", u.GetNamespace(), u.GetName()}, {"release", ns, name}}
}

// helmReplicas sums the replicas of the owned workloads whose keys meet
// keys, each once.
func helmReplicas(keys []helmKey, owned []*helmOwned) platform.Replicas {
	var sum platform.Replicas
	for _, o := range owned {
		if o != nil && slices.ContainsFunc(o.keys, func(k helmKey) bool { return slices.Contains(keys, k) }) {
			sum.Desired += o.replicas.Desired
			sum.Updated += o.replicas.Updated
			sum.Ready += o.replicas.Ready
			sum.Available += o.replicas.Available
		}
	}
	return sum
}

func or(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
