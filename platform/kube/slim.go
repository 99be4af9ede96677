package kube

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The workload informers hold every Deployment, StatefulSet, DaemonSet and
// CronJob fluxd watches, for as long as it runs: at 10,000 workloads the
// whole objects were about 45 MB of live heap (and twice that in RSS at
// GOGC's default). fluxd reads little of them, so the caches keep only
// that: 10,000 of the scale benchmark's Deployments, as the API server
// returns them, decode to 43 MB of heap, 38 MB without managedFields and
// 26 MB slimmed (most of what is left is the typed structs themselves,
// about 1.6 KB for a Deployment and one container). What is read, and by whom (all in this package; nothing outside it
// sees the caches):
//
//   - Workloads (fromDeployment, fromStatefulSet, fromDaemonSet,
//     fromCronJob in convert.go): metadata name, namespace and generation;
//     spec.replicas; the pod template's containers' and init containers'
//     name and image; the status's replica counts and observedGeneration;
//     a Deployment's Progressing condition (its reason and message say a
//     rollout is stuck).
//   - helmOwner (helmprogress.go): metadata labels and annotations (Helm's
//     release name and namespace).
//   - PullSecrets (secrets.go, through cacheLister.podSpecs): the pod
//     template's imagePullSecrets and serviceAccountName, and its
//     containers' images.
//   - the informers' own event handlers count events and read nothing.
//
// Everything else in spec and status goes: the selector, the strategy,
// volumes and volume claim templates, every container field but name and
// image (env, probes, resources, ports, mounts...), the pod template's
// metadata, a CronJob's schedule and its status's list of active Jobs,
// conditions fluxd does not look at, revision names. Scalars (counts,
// booleans) cost nothing apart from their struct and are kept; what is
// dropped is what allocates. Metadata is kept whole (the informers'
// machinery keys and compares by it, and it is small) but for
// managedFields and kubectl's last-applied-configuration annotation, a
// copy of the whole object that nothing here reads.
//
// A reader that starts using another field of a cached workload must keep
// it here too: TestSlimWorkloadKeepsWhatIsRead runs the readers above on
// randomly filled objects before and after slimming, and fails when a
// reader sees a difference.

// slimCached is the workload informers' transform: managedFields go from
// whatever the factory caches, and workloads keep only what fluxd reads
// (slimWorkload).
func slimCached(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return nil, err
	}
	return slimWorkload(obj)
}

// slimWorkload drops from a Deployment, StatefulSet, DaemonSet or CronJob
// every field fluxd does not read from its caches (see above). Anything
// else is returned as it is: in particular a cache.DeletedFinalStateUnknown
// tombstone, whose object came from the cache, was slimmed when it was
// stored, and may be in use by readers, so it must not be written to.
//
// It edits obj in place: an informer passes its transform an object
// freshly decoded from the API server's answer, which nothing else holds
// yet (client-go's informers never pass objects already in the cache). It
// is idempotent, as client-go asks of transforms.
func slimWorkload(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		slimMeta(&o.ObjectMeta)
		o.Spec = appsv1.DeploymentSpec{
			Replicas:        o.Spec.Replicas,
			Template:        slimPodTemplate(o.Spec.Template),
			MinReadySeconds: o.Spec.MinReadySeconds,
			Paused:          o.Spec.Paused,
		}
		var conds []appsv1.DeploymentCondition
		for _, c := range o.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				conds = append(conds, c)
			}
		}
		o.Status = appsv1.DeploymentStatus{
			ObservedGeneration:  o.Status.ObservedGeneration,
			Replicas:            o.Status.Replicas,
			UpdatedReplicas:     o.Status.UpdatedReplicas,
			ReadyReplicas:       o.Status.ReadyReplicas,
			AvailableReplicas:   o.Status.AvailableReplicas,
			UnavailableReplicas: o.Status.UnavailableReplicas,
			Conditions:          conds,
		}
	case *appsv1.StatefulSet:
		slimMeta(&o.ObjectMeta)
		o.Spec = appsv1.StatefulSetSpec{
			Replicas:        o.Spec.Replicas,
			Template:        slimPodTemplate(o.Spec.Template),
			MinReadySeconds: o.Spec.MinReadySeconds,
		}
		o.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: o.Status.ObservedGeneration,
			Replicas:           o.Status.Replicas,
			ReadyReplicas:      o.Status.ReadyReplicas,
			CurrentReplicas:    o.Status.CurrentReplicas,
			UpdatedReplicas:    o.Status.UpdatedReplicas,
			AvailableReplicas:  o.Status.AvailableReplicas,
		}
	case *appsv1.DaemonSet:
		slimMeta(&o.ObjectMeta)
		o.Spec = appsv1.DaemonSetSpec{
			Template:        slimPodTemplate(o.Spec.Template),
			MinReadySeconds: o.Spec.MinReadySeconds,
		}
		o.Status = appsv1.DaemonSetStatus{
			CurrentNumberScheduled: o.Status.CurrentNumberScheduled,
			NumberMisscheduled:     o.Status.NumberMisscheduled,
			DesiredNumberScheduled: o.Status.DesiredNumberScheduled,
			NumberReady:            o.Status.NumberReady,
			ObservedGeneration:     o.Status.ObservedGeneration,
			UpdatedNumberScheduled: o.Status.UpdatedNumberScheduled,
			NumberAvailable:        o.Status.NumberAvailable,
			NumberUnavailable:      o.Status.NumberUnavailable,
		}
	case *batchv1.CronJob:
		slimMeta(&o.ObjectMeta)
		o.Spec = batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: slimPodTemplate(o.Spec.JobTemplate.Spec.Template)},
		}}
		// A CronJob's status (its active Jobs, when it last ran) is not
		// read: fluxd counts it rolled out at once.
		o.Status = batchv1.CronJobStatus{}
	}
	return obj, nil
}

// slimMeta drops managedFields and kubectl's last-applied-configuration
// annotation; the rest of the metadata is kept (see above).
func slimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, big := m.Annotations[corev1.LastAppliedConfigAnnotation]; big {
		// A new map, not a delete: the old one stays as large as it was.
		a := make(map[string]string, len(m.Annotations)-1)
		for k, v := range m.Annotations {
			if k != corev1.LastAppliedConfigAnnotation {
				a[k] = v
			}
		}
		m.Annotations = a
	}
}

// slimPodTemplate keeps of a pod template what Workloads and PullSecrets
// read: the containers' names and images, the pull secrets and the
// service account. Its metadata (the pods' labels and annotations) goes.
func slimPodTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers:     slimContainers(t.Spec.InitContainers),
		Containers:         slimContainers(t.Spec.Containers),
		ImagePullSecrets:   slices.Clone(t.Spec.ImagePullSecrets),
		ServiceAccountName: t.Spec.ServiceAccountName,
	}}
}

// slimContainers copies containers' names and images into a slice of
// their number: a decoder grows a slice as append does, and a Container
// is about 400 bytes even when empty.
func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}
