package gates

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/promotion"
)

// The labels of a check's Job and its pods, so that a person finds them
// with kubectl get jobs -l fluxd.io/pipeline=web.
const (
	LabelPipeline = "fluxd.io/pipeline"
	LabelStage    = "fluxd.io/stage"
	LabelBundle   = "fluxd.io/bundle"
	LabelCheck    = "fluxd.io/check"
)

// runJob runs a Job made from the check's template in the stage's
// namespace, or finds the one it started before (see JobName), and waits
// until it completes, fails, or the check's timeout passes.
func (g *Gates) runJob(ctx context.Context, c promotion.Check, jc promotion.JobCheck, st promotion.Stage, b promotion.Bundle) error {
	if g.kube == nil {
		return errors.New("job checks run in the cluster, and this fluxd was started without one: run it with a cluster connection, or use an http or prometheus check")
	}
	if len(st.Services) == 0 {
		return fmt.Errorf("stage %q names no services, so there is no namespace to run the check's Job in", st.Name)
	}
	ns := st.Services[0].Namespace
	timeout := or(jc.Timeout, promotion.DefaultJobTimeout)
	want, err := newJob(c.Name, jc.Template, timeout, g.opts.jobTTL, ns, st.Name, b)
	if err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	job, err := g.startJob(ctx, want)
	if err != nil {
		return err
	}
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, g.opts.jobPoll, true, func(ctx context.Context) (bool, error) {
		j, err := g.kube.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("Job %s/%s was deleted while fluxd waited for it to finish; the check will start it again next time", ns, job.Name)
		case apierrors.IsForbidden(err):
			return false, forbidden(err, "get", "jobs.batch", ns)
		case err != nil:
			lastErr = err // the API server may be restarting: read again
			return false, nil
		}
		job = j
		return finished(j), nil
	})
	switch {
	case err == nil:
	case parent.Err() != nil:
		return fmt.Errorf("waiting for Job %s/%s was stopped: %w", ns, job.Name, context.Cause(parent))
	case ctx.Err() != nil:
		msg := fmt.Sprintf("Job %s/%s did not finish within %s (the check's timeout)", ns, job.Name, timeout)
		if lastErr != nil {
			msg += fmt.Sprintf("; the last read of it failed: %v", lastErr)
		}
		return fmt.Errorf("%s; %s", msg, g.podsSay(context.WithoutCancel(parent), job))
	default:
		return err
	}
	if cond := condition(job, batchv1.JobComplete); cond != nil {
		return nil
	}
	cond := condition(job, batchv1.JobFailed)
	why := strings.TrimPrefix(cond.Reason+": "+cond.Message, ": ")
	why = strings.TrimSuffix(why, ": ")
	if why != "" {
		why = " (" + why + ")"
	}
	return fmt.Errorf("Job %s/%s failed%s; %s", ns, job.Name, why, g.podsSay(context.WithoutCancel(parent), job))
}

// startJob creates want, or returns the Job of that name that a fluxd
// started before (a restart, or another replica).
func (g *Gates) startJob(ctx context.Context, want *batchv1.Job) (*batchv1.Job, error) {
	jobs := g.kube.BatchV1().Jobs(want.Namespace)
	job, err := jobs.Create(ctx, want, metav1.CreateOptions{FieldManager: "fluxd"})
	if err == nil {
		g.opts.log.Info("started a check's Job", "namespace", want.Namespace, "job", want.Name,
			"pipeline", want.Labels[LabelPipeline], "stage", want.Labels[LabelStage], "bundle", want.Labels[LabelBundle])
		return job, nil
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		job, err := jobs.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return nil, forbidden(err, "get", "jobs.batch", want.Namespace)
		}
		if err != nil {
			return nil, fmt.Errorf("reading Job %s/%s, which this check started before: %w", want.Namespace, want.Name, err)
		}
		if job.Labels[LabelBundle] != want.Labels[LabelBundle] || job.Labels[LabelStage] != want.Labels[LabelStage] {
			return nil, fmt.Errorf("a Job named %s already exists in namespace %s and is not this check's (its labels %s=%q, %s=%q): delete or rename it", want.Name, want.Namespace, LabelStage, job.Labels[LabelStage], LabelBundle, job.Labels[LabelBundle])
		}
		return job, nil
	case apierrors.IsForbidden(err):
		return nil, forbidden(err, "create", "jobs.batch", want.Namespace)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("namespace %s, where the stage's first service is and the check's Job runs, does not exist: %v", want.Namespace, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return nil, fmt.Errorf("the cluster refused the Job made from the check's template: %v (fix job.template in the Pipeline: it is a Job's spec, with template.spec.containers)", err)
	}
	return nil, fmt.Errorf("creating the check's Job %s/%s: %w", want.Namespace, want.Name, err)
}

// forbidden says which permission fluxd's service account lacks.
func forbidden(err error, verb, resource, ns string) error {
	return fmt.Errorf("fluxd's service account may not %s %s in namespace %s: give it a Role there (bound with a RoleBinding) that allows create and get on jobs in the batch API group, and list on pods and events, which job checks need (the cluster said: %v)", verb, resource, ns, err)
}

// finished: the Job completed or failed.
func finished(j *batchv1.Job) bool {
	return condition(j, batchv1.JobComplete) != nil || condition(j, batchv1.JobFailed) != nil
}

func condition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// podsSay is what the Job's pods say about why it did not pass.
func (g *Gates) podsSay(ctx context.Context, job *batchv1.Job) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if job.Spec.Selector == nil || err != nil {
		return "its pods could not be found (the Job has no selector yet)"
	}
	pods, err := g.kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("its pods could not be read: fluxd's service account needs list on pods in namespace %s", job.Namespace)
	}
	if err != nil {
		return fmt.Sprintf("its pods could not be read: %v", err)
	}
	if len(pods.Items) == 0 {
		return g.eventsSay(ctx, job)
	}
	return podsReason(pods.Items)
}

// eventsSay is the last warning about the Job's pods, for when none is
// left: the Job controller deletes them when the Job passes its deadline.
func (g *Gates) eventsSay(ctx context.Context, job *batchv1.Job) string {
	const none = "it has no pod left (kubectl describe job shows why: a quota, an admission policy, a missing service account, or its pods deleted at its deadline)"
	evs, err := g.kube.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,type=Warning"})
	if err != nil {
		return none
	}
	var last *corev1.Event
	for i, e := range evs.Items {
		if !strings.HasPrefix(e.InvolvedObject.Name, job.Name+"-") {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(*last)) {
			last = &evs.Items[i]
		}
	}
	if last == nil {
		return none
	}
	return fmt.Sprintf("it has no pod left; the last warning about pod %s: %s: %s", last.InvolvedObject.Name, last.Reason, oneLine(last.Message))
}

func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// podsReason picks the pod that tells most (the newest failed one, else
// the newest) and says why it did not succeed.
func podsReason(pods []corev1.Pod) string {
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		if fa, fb := a.Status.Phase == corev1.PodFailed, b.Status.Phase == corev1.PodFailed; fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return PodReason(&pods[0])
}

// PodReason says why a check's pod did not succeed: its failing
// container's termination (reason, exit code, message) or the reason it
// waits (ImagePullBackOff, ErrImagePull, CrashLoopBackOff ...), else the
// pod's own reason, or why it was not scheduled.
func PodReason(p *corev1.Pod) string {
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("pod %s: container %s %s", p.Name, cs.Name, terminated(t))
		}
	}
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil || w.Reason == "" || w.Reason == "ContainerCreating" || w.Reason == "PodInitializing" {
			continue
		}
		msg := fmt.Sprintf("pod %s: container %s is waiting: %s", p.Name, cs.Name, w.Reason)
		if w.Message != "" {
			msg += ": " + oneLine(w.Message)
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			msg += "; it last " + terminated(t)
		}
		return msg
	}
	if p.Status.Reason != "" {
		msg := fmt.Sprintf("pod %s: %s", p.Name, p.Status.Reason)
		if p.Status.Message != "" {
			msg += ": " + oneLine(p.Status.Message)
		}
		return msg
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("pod %s was not scheduled (%s): %s", p.Name, c.Reason, oneLine(c.Message))
		}
	}
	if p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
		return fmt.Sprintf("pod %s is Pending and not yet scheduled", p.Name)
	}
	return fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
}

func terminated(t *corev1.ContainerStateTerminated) string {
	msg := fmt.Sprintf("exited with code %d", t.ExitCode)
	if t.Reason != "" {
		msg += " (" + t.Reason + ")"
	}
	if t.Message != "" {
		msg += ": " + oneLine(t.Message)
	}
	return msg
}

// oneLine keeps a message to one line of at most 300 characters: a
// termination message may be a whole log tail.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}

// deadlineGrace is how long a Job may run after the check's timeout,
// when its template sets no activeDeadlineSeconds.
const deadlineGrace = time.Minute

// newJob makes the Job of check name for bundle b in stage stage, from
// template (a Job's spec as the Pipeline writes it).
func newJob(check string, template map[string]any, timeout, ttl time.Duration, ns, stage string, b promotion.Bundle) (*batchv1.Job, error) {
	raw, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("the job check's template cannot be read as a Job's spec: %v", err)
	}
	if _, ok := template["spec"]; ok {
		if _, kind := template["kind"]; kind {
			return nil, errors.New("the job check's template is a whole Job; give only its spec (what is under spec:, with template.spec.containers)")
		}
	}
	var spec batchv1.JobSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("the job check's template is not a Job's spec: %v (it has template.spec.containers, and may set backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished)", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(spec.Template.Spec.Containers) == 0 {
		return nil, errors.New("the job check's template has no template.spec.containers: give the container that runs the check")
	}
	labels := map[string]string{
		LabelPipeline: labelValue(b.Pipeline),
		LabelStage:    labelValue(stage),
		LabelBundle:   labelValue(b.ID),
		LabelCheck:    labelValue(check),
	}
	if spec.Template.Spec.RestartPolicy == "" {
		spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if spec.BackoffLimit == nil {
		spec.BackoffLimit = new(int32(0))
	}
	if spec.TTLSecondsAfterFinished == nil {
		spec.TTLSecondsAfterFinished = new(int32(ttl.Seconds()))
	}
	if spec.ActiveDeadlineSeconds == nil {
		// The Job stops itself soon after fluxd stops waiting for it;
		// not at once, so that its pods are still there to say why.
		spec.ActiveDeadlineSeconds = new(int64(math.Ceil((timeout + deadlineGrace).Seconds())))
	}
	if spec.Template.Labels == nil {
		spec.Template.Labels = map[string]string{}
	}
	for k, v := range labels {
		spec.Template.Labels[k] = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      JobName(b.Pipeline, stage, b.ID, check, raw, timeout),
			Namespace: ns,
			Labels:    labels,
			Annotations: map[string]string{
				"fluxd.io/check-of": fmt.Sprintf("pipeline %s, stage %s, bundle %s, check %s", b.Pipeline, stage, b.ID, check),
			},
		},
		Spec: spec,
	}, nil
}

// JobName names a check's Job: the same for the same pipeline, stage,
// bundle, check, template and timeout, so that a restarted fluxd finds
// the Job it started; a DNS label of at most 63 characters (the Job
// controller labels the Job's pods with it). It reads
// PIPELINE-STAGE-CHECK (cut to fit), the bundle's ID, and a hash of all
// of it.
func JobName(pipeline, stage, bundle, check string, template []byte, timeout time.Duration) string {
	h := sha256.New()
	for _, part := range []string{pipeline, stage, bundle, check, string(template), timeout.String()} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	sum := hex.EncodeToString(h.Sum(nil))[:8]
	id := dnsSafe(bundle)
	if len(id) > 12 {
		id = id[:12]
	}
	suffix := "-" + sum
	if id != "" {
		suffix = "-" + id + suffix
	}
	prefix := dnsSafe(pipeline + "-" + stage + "-" + check)
	if len(prefix) > 63-len(suffix) {
		prefix = strings.TrimRight(prefix[:63-len(suffix)], "-")
	}
	if prefix == "" {
		prefix = "check"
	}
	return prefix + suffix
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// dnsSafe is s in lower case, each run of other characters one '-', with
// none at either end.
func dnsSafe(s string) string {
	return strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

var notLabel = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue is s as a label's value: at most 63 of [A-Za-z0-9._-],
// beginning and ending with a letter or digit.
func labelValue(s string) string {
	v := notLabel.ReplaceAllString(s, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}
