package gates

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func TestJobName(t *testing.T) {
	t.Parallel()
	tmpl := []byte(`{"template":{}}`)
	a := JobName("web", "staging", "0123456789ab", "smoke", tmpl, time.Minute)
	if a != JobName("web", "staging", "0123456789ab", "smoke", tmpl, time.Minute) {
		t.Error("the same check's Job is named twice differently: a restarted fluxd would start a second Job")
	}
	if !strings.HasPrefix(a, "web-staging-smoke-0123456789ab-") || !dnsLabel.MatchString(a) {
		t.Errorf("name %q: want web-staging-smoke-0123456789ab-HASH, a DNS label", a)
	}
	for what, other := range map[string]string{
		"bundle":   JobName("web", "staging", "ba9876543210", "smoke", tmpl, time.Minute),
		"stage":    JobName("web", "prod", "0123456789ab", "smoke", tmpl, time.Minute),
		"check":    JobName("web", "staging", "0123456789ab", "smoke-2", tmpl, time.Minute),
		"template": JobName("web", "staging", "0123456789ab", "smoke", []byte(`{"template":{"x":1}}`), time.Minute),
		"timeout":  JobName("web", "staging", "0123456789ab", "smoke", tmpl, time.Hour),
		// Names that read the same once made DNS-safe differ by the hash.
		"spelling": JobName("web", "staging", "0123456789ab", "Smoke", tmpl, time.Minute),
	} {
		if other == a {
			t.Errorf("another %s gives the same Job name %q", what, a)
		}
	}
	long := JobName(strings.Repeat("Pipeline_", 20), strings.Repeat("s", 63), "0123456789abcdef", "a check / with spaces", tmpl, time.Minute)
	if len(long) > 63 || !dnsLabel.MatchString(long) || !strings.Contains(long, "-0123456789ab-") {
		t.Errorf("long name %q (%d): want a DNS label of at most 63 with the bundle's short ID", long, len(long))
	}
	if n := JobName("", "", "", "", nil, 0); !dnsLabel.MatchString(n) {
		t.Errorf("empty parts give %q, not a DNS label", n)
	}
}

func TestNewJob(t *testing.T) {
	t.Parallel()
	b := promotion.Bundle{ID: "0123456789ab", Pipeline: "team/web"}
	tmpl := map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "smoke", "image": "curlimages/curl:8", "args": []any{"-f", "http://web/healthz"}}}}}}
	j, err := newJob("smoke", tmpl, 90*time.Second, time.Hour, "team-staging", "staging", b)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{LabelPipeline: "team-web", LabelStage: "staging", LabelBundle: "0123456789ab", LabelCheck: "smoke"}
	if d := cmp.Diff(wantLabels, j.Labels); d != "" {
		t.Errorf("Job labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantLabels, j.Spec.Template.Labels); d != "" {
		t.Errorf("pod labels (-want +got):\n%s", d)
	}
	if j.Namespace != "team-staging" || len(j.OwnerReferences) != 0 {
		t.Errorf("namespace %q, owners %v: want team-staging, none", j.Namespace, j.OwnerReferences)
	}
	if *j.Spec.BackoffLimit != 0 || *j.Spec.TTLSecondsAfterFinished != 3600 || *j.Spec.ActiveDeadlineSeconds != 150 ||
		j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %d, ttl %d, deadline %d, restartPolicy %q: want 0, 3600, 150 (the timeout and a minute), Never", *j.Spec.BackoffLimit,
			*j.Spec.TTLSecondsAfterFinished, *j.Spec.ActiveDeadlineSeconds, j.Spec.Template.Spec.RestartPolicy)
	}
	if c := j.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "curlimages/curl:8" || len(c[0].Args) != 2 {
		t.Errorf("containers %+v: want the template's", c)
	}

	t.Run("the template's own settings win", func(t *testing.T) {
		own := map[string]any{"backoffLimit": 3, "ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 30,
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "smoke"}},
				"spec": map[string]any{"restartPolicy": "OnFailure", "containers": []any{map[string]any{"name": "c", "image": "i"}}}}}
		j, err := newJob("smoke", own, time.Minute, time.Hour, "ns", "staging", b)
		if err != nil {
			t.Fatal(err)
		}
		if *j.Spec.BackoffLimit != 3 || *j.Spec.TTLSecondsAfterFinished != 60 || *j.Spec.ActiveDeadlineSeconds != 30 ||
			j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || j.Spec.Template.Labels["app"] != "smoke" {
			t.Errorf("the template's settings were not kept: %+v", j.Spec)
		}
	})

	for name, tc := range map[string]struct {
		tmpl map[string]any
		want string
	}{
		"unknown field":  {map[string]any{"containers": []any{}}, `unknown field "containers"`},
		"no containers":  {map[string]any{"template": map[string]any{"spec": map[string]any{}}}, "no template.spec.containers"},
		"a whole Job":    {map[string]any{"kind": "Job", "spec": map[string]any{}}, "give only its spec"},
		"a wrong type":   {map[string]any{"backoffLimit": "three"}, "backoffLimit"},
		"non-string key": {map[string]any{"template": map[any]any{1: 2}}, "cannot be read"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newJob("smoke", tc.tmpl, time.Minute, time.Hour, "ns", "staging", b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error saying %q, got %v", tc.want, err)
			}
		})
	}
}

func TestPodReason(t *testing.T) {
	t.Parallel()
	pod := func(st corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n"}, Status: st}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"exit code": {pod(corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "ok", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
			{Name: "smoke", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 22, Reason: "Error", Message: "curl: (22) The requested URL returned error: 503\n"}}}}}),
			"pod p: container smoke exited with code 22 (Error): curl: (22) The requested URL returned error: 503"},
		"image pull": {pod(corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "smoke", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope:1"`}}}}}),
			`pod p: container smoke is waiting: ImagePullBackOff: Back-off pulling image "nope:1"`},
		"err image pull in an init container": {pod(corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "smoke", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}),
			"pod p: container init is waiting: ErrImagePull"},
		"crash loop says the last exit": {pod(corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "smoke", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}),
			"pod p: container smoke is waiting: CrashLoopBackOff; it last exited with code 1 (Error)"},
		"oom": {pod(corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "smoke", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}),
			"pod p: container smoke exited with code 137 (OOMKilled)"},
		"evicted": {pod(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}),
			"pod p: Evicted: The node was low on resource: memory."},
		"unschedulable": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}}},
			"pod p was not scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."},
		"running": {pod(corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "smoke", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}),
			"pod p is Running"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := PodReason(tc.pod); got != tc.want {
				t.Errorf("\nwant %s\ngot  %s", tc.want, got)
			}
		})
	}
}

// jobFixture is a fake cluster whose Job controller is a reactor: each
// Job created gets a selector and a pod, and finishes as finish says.
type jobFixture struct {
	kube    *fake.Clientset
	creates int
}

func newJobFixture(t *testing.T, finish func(*batchv1.Job) (batchv1.JobConditionType, corev1.PodStatus), objs ...runtime.Object) *jobFixture {
	f := &jobFixture{kube: fake.NewClientset(objs...)}
	f.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.creates++
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		if finish == nil {
			return false, nil, nil
		}
		j.UID = types.UID("uid-" + j.Name)
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": string(j.UID)}}
		cond, podStatus := finish(j)
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: map[batchv1.JobConditionType]string{batchv1.JobFailed: "BackoffLimitExceeded"}[cond], Message: map[batchv1.JobConditionType]string{batchv1.JobFailed: "Job has reached the specified backoff limit"}[cond]}}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x1", Namespace: j.Namespace,
			Labels: map[string]string{"batch.kubernetes.io/controller-uid": string(j.UID)}}, Status: podStatus}
		if err := f.kube.Tracker().Add(pod); err != nil {
			t.Fatal(err)
		}
		return false, nil, nil // the tracker stores the Job as changed here
	})
	return f
}

func jobCheck() (promotion.Check, promotion.Stage, promotion.Bundle) {
	c := promotion.Check{Name: "smoke", Job: &promotion.JobCheck{Timeout: 2 * time.Second, Template: map[string]any{
		"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "smoke", "image": "smoke:1"}}}}}}}
	st := promotion.Stage{Name: "staging", Services: []platform.ID{{Namespace: "team-staging", Kind: "deployment", Name: "web"}, {Namespace: "other", Kind: "deployment", Name: "api"}}}
	return c, st, promotion.Bundle{ID: "0123456789ab", Pipeline: "web"}
}

func TestJobCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, st, b := jobCheck()

	t.Run("a Job that completes passes, in the stage's first service's namespace", func(t *testing.T) {
		f := newJobFixture(t, func(*batchv1.Job) (batchv1.JobConditionType, corev1.PodStatus) {
			return batchv1.JobComplete, corev1.PodStatus{Phase: corev1.PodSucceeded}
		})
		if err := New(f.kube, WithJobPoll(10*time.Millisecond)).Run(ctx, c, st, b); err != nil {
			t.Fatalf("want a pass, got %v", err)
		}
		jobs, _ := f.kube.BatchV1().Jobs("team-staging").List(ctx, metav1.ListOptions{LabelSelector: LabelBundle + "=0123456789ab," + LabelStage + "=staging," + LabelPipeline + "=web"})
		if len(jobs.Items) != 1 {
			t.Fatalf("want one Job in team-staging with the bundle's labels, got %d", len(jobs.Items))
		}
	})

	t.Run("a failed Job fails with its pod's reason", func(t *testing.T) {
		f := newJobFixture(t, func(*batchv1.Job) (batchv1.JobConditionType, corev1.PodStatus) {
			return batchv1.JobFailed, corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "smoke",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "smoke test: 2 of 10 requests failed"}}}}}
		})
		err := New(f.kube, WithJobPoll(10*time.Millisecond)).Run(ctx, c, st, b)
		if err == nil {
			t.Fatal("want a failure")
		}
		for _, want := range []string{"team-staging/web-staging-smoke-0123456789ab-", "failed (BackoffLimitExceeded", "container smoke exited with code 3 (Error): smoke test: 2 of 10 requests failed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})

	t.Run("a Job that does not finish in time fails with why", func(t *testing.T) {
		f := newJobFixture(t, func(*batchv1.Job) (batchv1.JobConditionType, corev1.PodStatus) {
			return "", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "smoke",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "smoke:1"`}}}}}
		})
		c := c
		c.Job = &promotion.JobCheck{Template: c.Job.Template, Timeout: 100 * time.Millisecond}
		err := New(f.kube, WithJobPoll(10*time.Millisecond)).Run(ctx, c, st, b)
		if err == nil || !strings.Contains(err.Error(), "did not finish within 100ms") || !strings.Contains(err.Error(), "ImagePullBackOff") {
			t.Fatalf("want a failure saying the timeout and ImagePullBackOff, got %v", err)
		}
	})

	t.Run("a restarted fluxd finds the Job it started", func(t *testing.T) {
		want, err := newJob(c.Name, c.Job.Template, c.Job.Timeout, DefaultJobTTL, "team-staging", st.Name, b)
		if err != nil {
			t.Fatal(err)
		}
		want.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		f := newJobFixture(t, nil, want)
		if err := New(f.kube, WithJobPoll(10*time.Millisecond)).Run(ctx, c, st, b); err != nil {
			t.Fatalf("want the finished Job's pass, got %v", err)
		}
		jobs, _ := f.kube.BatchV1().Jobs("team-staging").List(ctx, metav1.ListOptions{})
		if len(jobs.Items) != 1 {
			t.Errorf("want the one Job, got %d", len(jobs.Items))
		}
	})

	t.Run("RBAC: says which verb on which resource", func(t *testing.T) {
		f := newJobFixture(t, nil)
		f.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x",
				errFrom(`User "system:serviceaccount:fluxd:fluxd" cannot create resource "jobs" in API group "batch" in the namespace "team-staging"`))
		})
		err := New(f.kube).Run(ctx, c, st, b)
		if err == nil {
			t.Fatal("want a failure")
		}
		for _, want := range []string{"may not create jobs.batch in namespace team-staging", "Role", "list on pods"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})

	t.Run("no cluster", func(t *testing.T) {
		if err := New(nil).Run(ctx, c, st, b); err == nil || !strings.Contains(err.Error(), "without one") {
			t.Errorf("want a failure saying fluxd has no cluster, got %v", err)
		}
	})
}

type errFrom string

func (e errFrom) Error() string { return string(e) }
