package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/platform"
)

// Diagnose says what a workload's pods report when they are not ready,
// for a person reading why a rollout failed: "pod X: container c is
// waiting: CrashLoopBackOff (back-off restarting failed container)".
func (c *Cluster) Diagnose(ctx context.Context, id platform.ID) string {
	var sel *metav1.LabelSelector
	switch id.Kind {
	case "deployment":
		d, err := c.client.AppsV1().Deployments(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		sel = d.Spec.Selector
	case "statefulset":
		s, err := c.client.AppsV1().StatefulSets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		sel = s.Spec.Selector
	case "daemonset":
		d, err := c.client.AppsV1().DaemonSets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		sel = d.Spec.Selector
	default:
		return ""
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	pods, err := c.client.CoreV1().Pods(id.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return ""
	}
	var lines []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.Ready {
				continue
			}
			switch {
			case cs.State.Waiting != nil:
				line := fmt.Sprintf("pod %s: container %s is waiting: %s (%s)", p.Name, cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				// A crash loop's own cause is the last exit, not the wait.
				if t := cs.LastTerminationState.Terminated; t != nil {
					line += fmt.Sprintf("; it last exited with code %d (%s)", t.ExitCode, t.Reason)
				}
				lines = append(lines, line)
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				line := fmt.Sprintf("pod %s: container %s exited with code %d: %s", p.Name, cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
				// A crash loop caught between its exit and the kubelet's
				// next wait: say it is one.
				if cs.RestartCount > 0 {
					line += fmt.Sprintf(" (restarted %d times)", cs.RestartCount)
				}
				lines = append(lines, line)
			case cs.State.Running != nil:
				// Running but not ready: the kubelet's last probe failure
				// (an event) says why.
				line := fmt.Sprintf("pod %s: container %s is running but not ready", p.Name, cs.Name)
				// A crash loop caught between restarts: its last exit.
				if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 {
					line += fmt.Sprintf(" (restarted %d times; it last exited with code %d (%s))", cs.RestartCount, t.ExitCode, t.Reason)
				}
				if why := c.lastProbeFailure(ctx, &p, cs.Name); why != "" {
					line += ": " + why
				}
				lines = append(lines, line)
			}
		}
		if p.Status.Phase == corev1.PodPending {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
					lines = append(lines, fmt.Sprintf("pod %s is not scheduled: %s", p.Name, cond.Message))
				}
			}
		}
	}
	sort.Strings(lines)
	if len(lines) > 5 {
		lines = append(lines[:5], fmt.Sprintf("(and %d more)", len(lines)-5))
	}
	return strings.Join(lines, "; ")
}

// lastProbeFailure is the message of the newest "Unhealthy" event the
// kubelet recorded for container in pod ("Readiness probe failed: HTTP
// probe failed with statuscode: 503"), or "" when there is none or events
// cannot be read.
func (c *Cluster) lastProbeFailure(ctx context.Context, pod *corev1.Pod, container string) string {
	evs, err := c.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Unhealthy",
	})
	if err != nil {
		return ""
	}
	var best *corev1.Event
	for i := range evs.Items {
		e := &evs.Items[i]
		if e.InvolvedObject.UID != pod.UID || (e.InvolvedObject.FieldPath != "" && e.InvolvedObject.FieldPath != "spec.containers{"+container+"}") {
			continue
		}
		if best == nil || eventTime(e).After(eventTime(best)) {
			best = e
		}
	}
	if best == nil {
		return ""
	}
	return strings.TrimSpace(best.Message)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
