package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/fluxd/fluxd/internal/fielddiff"
	"github.com/fluxd/fluxd/platform"
)

// maxEvents bounds the events Resources reports.
const maxEvents = 50

// Resources reads what workload id runs: its ReplicaSets (a Deployment's)
// or Jobs (a CronJob's), its pods and their events, straight from the API
// server (the caches hold only workloads). platform.ErrNotFound when the
// workload is not in the cluster.
func (c *Cluster) Resources(ctx context.Context, id platform.ID) (*platform.Resources, error) {
	uid, selector, err := c.workloadUID(ctx, id)
	if err != nil {
		return nil, err
	}
	byLabels := metav1.ListOptions{LabelSelector: selector}
	ns := id.Namespace
	out := &platform.Resources{}
	owners := map[types.UID]string{uid: ""} // pod owners: the workload, or what it owns
	involved := map[types.UID]bool{uid: true}
	switch id.Kind {
	case "deployment":
		rss, err := c.client.AppsV1().ReplicaSets(ns).List(ctx, byLabels)
		if err != nil {
			return nil, fmt.Errorf("listing the ReplicaSets of %s: %w", id, err)
		}
		for _, rs := range rss.Items {
			if !ownedBy(rs.OwnerReferences, uid) {
				continue
			}
			owners[rs.UID], involved[rs.UID] = rs.Name, true
			out.Owned = append(out.Owned, replicaSet(rs))
		}
	case "cronjob":
		jobs, err := c.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the Jobs of %s: %w", id, err)
		}
		for _, j := range jobs.Items {
			if !ownedBy(j.OwnerReferences, uid) {
				continue
			}
			owners[j.UID], involved[j.UID] = j.Name, true
			var want int32 = 1
			if j.Spec.Completions != nil {
				want = *j.Spec.Completions
			}
			out.Owned = append(out.Owned, platform.Owned{Kind: "Job", Name: j.Name, Desired: want, Ready: j.Status.Succeeded,
				Images: images(j.Spec.Template.Spec), Created: j.CreationTimestamp.Time})
		}
	}
	sort.Slice(out.Owned, func(i, j int) bool { return out.Owned[i].Created.After(out.Owned[j].Created) })
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, byLabels)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", id, err)
	}
	for _, p := range pods.Items {
		owner, ok := podOwner(p.OwnerReferences, owners)
		if !ok {
			continue
		}
		involved[p.UID] = true
		out.Pods = append(out.Pods, pod(p, owner))
	}
	sort.Slice(out.Pods, func(i, j int) bool {
		if !out.Pods[i].Created.Equal(out.Pods[j].Created) {
			return out.Pods[i].Created.After(out.Pods[j].Created)
		}
		return out.Pods[i].Name < out.Pods[j].Name
	})
	evs, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the events of %s: %w", id, err)
	}
	for _, e := range evs.Items {
		if !involved[e.InvolvedObject.UID] {
			continue
		}
		out.Events = append(out.Events, platform.Event{Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
			Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, LastSeen: eventTime(&e)})
	}
	sort.SliceStable(out.Events, func(i, j int) bool { return out.Events[i].LastSeen.After(out.Events[j].LastSeen) })
	if len(out.Events) > maxEvents {
		out.Events = out.Events[:maxEvents]
	}
	return out, nil
}

// PodLog reads the last lines of one of workload id's pods' log, bounded
// by opts. A pod that is not the workload's is platform.ErrNotFound, so
// that no pod outside what the caller may see is read by name.
func (c *Cluster) PodLog(ctx context.Context, id platform.ID, podName string, opts platform.LogOptions) (*platform.PodLog, error) {
	res, err := c.Resources(ctx, id)
	if err != nil {
		return nil, err
	}
	var p *platform.Pod
	for i := range res.Pods {
		if res.Pods[i].Name == podName {
			p = &res.Pods[i]
		}
	}
	if p == nil {
		return nil, fmt.Errorf("pod %q of %s: %w", podName, id, platform.ErrNotFound)
	}
	container := opts.Container
	if container == "" {
		for _, ct := range p.Containers {
			if !ct.Init {
				container = ct.Name
				break
			}
		}
	}
	known := false
	for _, ct := range p.Containers {
		known = known || ct.Name == container
	}
	if !known {
		return nil, fmt.Errorf("container %q of pod %s: %w", container, podName, platform.ErrNotFound)
	}
	tail, limit := opts.TailLines, opts.LimitBytes
	rc, err := c.client.CoreV1().Pods(id.Namespace).GetLogs(podName, &corev1.PodLogOptions{Container: container, TailLines: &tail, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log of pod %s, container %s: %w", podName, container, logError(err))
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the log of pod %s, container %s: %w", podName, container, err)
	}
	out := &platform.PodLog{Container: container}
	if int64(len(b)) >= limit {
		// The API server cut it (or would have): the last line may be cut.
		b, out.Truncated = b[:min(int64(len(b)), limit)], true
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), int(limit)+1)
	for sc.Scan() {
		out.Lines = append(out.Lines, sc.Text())
	}
	return out, nil
}

// logError says, of a log read the API server refused, what a person
// can do about it.
func logError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code >= 500 || strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "dial") {
		return fmt.Errorf("%w: %w", platform.ErrNoLog, err)
	}
	return err
}

// Compare says what applying manifest (workload id's, from git) would
// make of the live object: a server-side dry run of the apply a release
// makes (field manager fluxd, taking over conflicts, an autoscaler's
// replicas left alone), and its field diff as the sync's dry run shows it.
func (c *Cluster) Compare(ctx context.Context, id platform.ID, manifest []byte) (*platform.Comparison, error) {
	obj, gvr, err := c.parse(id, manifest)
	if err != nil {
		return nil, err
	}
	if c.dynamic == nil {
		return nil, fmt.Errorf("comparing %s: no dynamic client", id)
	}
	res := c.dynamic.Resource(gvr).Namespace(obj.GetNamespace())
	out := &platform.Comparison{Action: platform.ActionUnchanged}
	live, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		out.Action = platform.ActionCreated
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s from the cluster: %w", id, err)
	}
	if c.autoscaled(ctx, id) {
		// As a release leaves them, without writing anything: the live
		// count stands in for the handover a release makes first.
		keepLiveReplicas(obj, live)
	}
	merged, err := res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("a dry run of applying %s: %w", id, err)
	}
	out.Diff = fielddiff.Lines(live.Object, merged.Object)
	if len(out.Diff) > 0 {
		out.Action = platform.ActionChanged
	}
	live.SetManagedFields(nil)
	if a := live.GetAnnotations(); a != nil {
		delete(a, corev1.LastAppliedConfigAnnotation)
		live.SetAnnotations(a)
	}
	if out.Live, err = sigyaml.Marshal(live.Object); err != nil {
		return nil, fmt.Errorf("writing %s as YAML: %w", id, err)
	}
	return out, nil
}

// workloadUID reads workload id from the API server: its UID, and the
// selector of its pods (a CronJob's Jobs choose theirs: everything).
func (c *Cluster) workloadUID(ctx context.Context, id platform.ID) (types.UID, string, error) {
	var m metav1.Object
	var sel *metav1.LabelSelector
	var err error
	switch id.Kind {
	case "deployment":
		var d *appsv1.Deployment
		if d, err = c.client.AppsV1().Deployments(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); err == nil {
			m, sel = d, d.Spec.Selector
		}
	case "statefulset":
		var s *appsv1.StatefulSet
		if s, err = c.client.AppsV1().StatefulSets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); err == nil {
			m, sel = s, s.Spec.Selector
		}
	case "daemonset":
		var d *appsv1.DaemonSet
		if d, err = c.client.AppsV1().DaemonSets(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); err == nil {
			m, sel = d, d.Spec.Selector
		}
	case "cronjob":
		var j *batchv1.CronJob
		if j, err = c.client.BatchV1().CronJobs(id.Namespace).Get(ctx, id.Name, metav1.GetOptions{}); err == nil {
			m = j
		}
	default:
		return "", "", fmt.Errorf("fluxd does not manage kind %s: %w", id.Kind, platform.ErrNotFound)
	}
	if apierrors.IsNotFound(err) {
		return "", "", fmt.Errorf("%s is not in the cluster: %w", id, platform.ErrNotFound)
	}
	if err != nil {
		return "", "", fmt.Errorf("reading %s from the cluster: %w", id, err)
	}
	selector := ""
	if sel != nil {
		// Only what the selector matches is listed (ownership is
		// checked besides): not every pod of a large namespace.
		if ls, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			selector = ls.String()
		}
	}
	return m.GetUID(), selector, nil
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func podOwner(refs []metav1.OwnerReference, owners map[types.UID]string) (string, bool) {
	for _, r := range refs {
		if name, ok := owners[r.UID]; ok {
			return name, true
		}
	}
	return "", false
}

func replicaSet(rs appsv1.ReplicaSet) platform.Owned {
	var want int32 = 1
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	return platform.Owned{Kind: "ReplicaSet", Name: rs.Name, Revision: rs.Annotations["deployment.kubernetes.io/revision"],
		Desired: want, Ready: rs.Status.ReadyReplicas, Images: images(rs.Spec.Template.Spec), Created: rs.CreationTimestamp.Time}
}

func images(spec corev1.PodSpec) []string {
	var out []string
	for _, c := range spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// pod converts a pod, its status worded as kubectl's STATUS column.
func pod(p corev1.Pod, owner string) platform.Pod {
	out := platform.Pod{Name: p.Name, Owner: owner, Node: p.Spec.NodeName, Created: p.CreationTimestamp.Time, Status: string(p.Status.Phase)}
	if p.Status.Reason != "" {
		out.Status = p.Status.Reason
	}
	images := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	for _, cs := range p.Status.InitContainerStatuses {
		out.Containers = append(out.Containers, container(cs, true, images))
		out.Restarts += cs.RestartCount
		if cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
			out.Status = "Init:" + cs.State.Terminated.Reason
		} else if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing" {
			out.Status = "Init:" + cs.State.Waiting.Reason
		}
	}
	ready := len(p.Status.ContainerStatuses) > 0
	for _, cs := range p.Status.ContainerStatuses {
		out.Containers = append(out.Containers, container(cs, false, images))
		out.Restarts += cs.RestartCount
		ready = ready && cs.Ready
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			out.Status = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			out.Status = cs.State.Terminated.Reason
		}
	}
	if len(p.Status.ContainerStatuses) == 0 {
		// No status yet (scheduling): the spec's containers.
		for _, c := range p.Spec.Containers {
			out.Containers = append(out.Containers, platform.PodContainer{Name: c.Name, Image: c.Image, State: "waiting"})
		}
	}
	out.Ready = ready
	if p.DeletionTimestamp != nil {
		out.Status = "Terminating"
	}
	return out
}

func container(cs corev1.ContainerStatus, init bool, images map[string]string) platform.PodContainer {
	out := platform.PodContainer{Name: cs.Name, Image: images[cs.Name], Init: init, Ready: cs.Ready, Restarts: cs.RestartCount}
	switch {
	case cs.State.Running != nil:
		out.State = "running"
	case cs.State.Waiting != nil:
		out.State, out.Reason = "waiting", cs.State.Waiting.Reason
	case cs.State.Terminated != nil:
		out.State, out.Reason = "terminated", cs.State.Terminated.Reason
	}
	return out
}
