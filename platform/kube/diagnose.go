package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

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
				lines = append(lines, fmt.Sprintf("pod %s: container %s is waiting: %s (%s)", p.Name, cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				lines = append(lines, fmt.Sprintf("pod %s: container %s exited with code %d: %s", p.Name, cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason))
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
