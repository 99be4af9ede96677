package kube

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/fluxd/fluxd/platform"
)

func containers(spec corev1.PodSpec) []platform.Container {
	var out []platform.Container
	for _, c := range spec.InitContainers {
		out = append(out, platform.Container{Name: c.Name, Image: c.Image, Init: true})
	}
	for _, c := range spec.Containers {
		out = append(out, platform.Container{Name: c.Name, Image: c.Image})
	}
	return out
}

func status(caughtUp bool, r platform.Replicas) string {
	if caughtUp && r.Updated == r.Desired && r.Ready == r.Desired && r.Available == r.Desired {
		return "ready"
	}
	return "updating"
}

// updatedOnly counts a workload's pods for a rollout's progress: ready and
// available count updated pods only. The controllers' status counts every
// pod, old ones too, so that during a rollout "3/3 ready" could mean three
// old pods and no new one. Their counts of updated pods that are ready are
// not in the status; at least ready minus the old pods are, and that lower
// bound is exact whenever the old pods are all ready (as they are while a
// rollout replaces them) or gone.
func updatedOnly(desired, total, updated, ready, available int32) platform.Replicas {
	old := max(total-updated, 0)
	return platform.Replicas{Desired: desired, Updated: updated,
		Ready: min(max(ready-old, 0), updated), Available: min(max(available-old, 0), updated)}
}

func fromDeployment(d *appsv1.Deployment) platform.Workload {
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	r := updatedOnly(desired, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	w := platform.Workload{
		ID:         platform.ID{Namespace: d.Namespace, Kind: "deployment", Name: d.Name},
		Containers: containers(d.Spec.Template.Spec),
		Replicas:   r,
		Status:     status(d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == desired, r),
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			w.Stuck = c.Message
		}
	}
	return w
}

func fromStatefulSet(s *appsv1.StatefulSet) platform.Workload {
	desired := int32(1)
	if s.Spec.Replicas != nil {
		desired = *s.Spec.Replicas
	}
	r := updatedOnly(desired, s.Status.Replicas, s.Status.UpdatedReplicas, s.Status.ReadyReplicas, s.Status.AvailableReplicas)
	return platform.Workload{
		ID:         platform.ID{Namespace: s.Namespace, Kind: "statefulset", Name: s.Name},
		Containers: containers(s.Spec.Template.Spec),
		Replicas:   r,
		Status:     status(s.Status.ObservedGeneration >= s.Generation, r),
		Generation: s.Generation, ObservedGeneration: s.Status.ObservedGeneration,
	}
}

func fromDaemonSet(d *appsv1.DaemonSet) platform.Workload {
	// A DaemonSet is judged by its scheduled counts.
	r := updatedOnly(d.Status.DesiredNumberScheduled, d.Status.CurrentNumberScheduled, d.Status.UpdatedNumberScheduled, d.Status.NumberReady, d.Status.NumberAvailable)
	return platform.Workload{
		ID:         platform.ID{Namespace: d.Namespace, Kind: "daemonset", Name: d.Name},
		Containers: containers(d.Spec.Template.Spec),
		Replicas:   r,
		Status:     status(d.Status.ObservedGeneration >= d.Generation && d.Status.CurrentNumberScheduled == d.Status.DesiredNumberScheduled, r),
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
	}
}

func fromCronJob(cj *batchv1.CronJob) platform.Workload {
	return platform.Workload{
		ID:         platform.ID{Namespace: cj.Namespace, Kind: "cronjob", Name: cj.Name},
		Containers: containers(cj.Spec.JobTemplate.Spec.Template.Spec),
		// A CronJob has no rollout: its next Job runs the new spec.
		Status:     "ready",
		Generation: cj.Generation, ObservedGeneration: cj.Generation,
	}
}
