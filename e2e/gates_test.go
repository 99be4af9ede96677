package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/gates"
	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
)

// TestJobCheckOnTheStack runs promotion's job check against the stack's
// real API server and Job controller. The pods run on kwok's fake nodes,
// whose stock pod-complete stage ends every running pod of a Job with
// exit code 0: so a Job passes here, and a failure is made by a pod that
// cannot be scheduled. A container that really exits non-zero needs the
// real node (left for the real-node run; the reason extraction for it is
// tested on client-go's fake in gates/job_test.go).
func TestJobCheckOnTheStack(t *testing.T) {
	kc := kubeClient(t)
	ctx := testContext(t)
	const ns = "gates-job"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := gates.New(kc, gates.WithJobPoll(200*time.Millisecond))
	stage := promotion.Stage{Name: "staging", Services: []platform.ID{{Namespace: ns, Kind: "deployment", Name: "web"}}}
	bundle := promotion.Bundle{ID: "0123456789ab", Pipeline: "web"}
	check := func(name string, timeout time.Duration, podSpec map[string]any) promotion.Check {
		podSpec["containers"] = []any{map[string]any{"name": "smoke", "image": "example.invalid/smoke:1", "args": []any{"--url", "http://web/healthz"}}}
		return promotion.Check{Name: name, Job: &promotion.JobCheck{Timeout: timeout, Template: map[string]any{"template": map[string]any{"spec": podSpec}}}}
	}
	jobsOf := func(checkName string) int {
		l, err := kc.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: gates.LabelPipeline + "=web," + gates.LabelStage + "=staging," + gates.LabelBundle + "=0123456789ab," + gates.LabelCheck + "=" + checkName})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}

	t.Run("a Job whose pod succeeds passes, and a second run finds it", func(t *testing.T) {
		c := check("smoke", time.Minute, map[string]any{})
		if err := g.Run(ctx, c, stage, bundle); err != nil {
			t.Fatalf("want a pass, got %v", err)
		}
		if err := g.Run(ctx, c, stage, bundle); err != nil {
			t.Fatalf("the second run (a restarted fluxd): want the same pass, got %v", err)
		}
		if n := jobsOf("smoke"); n != 1 {
			t.Errorf("want one Job with the check's labels in %s, got %d", ns, n)
		}
	})

	t.Run("a pod that is never scheduled fails at the timeout with why", func(t *testing.T) {
		c := check("unschedulable", 5*time.Second, map[string]any{"nodeSelector": map[string]any{"fluxd.io/no-such-node": "true"}})
		err := g.Run(ctx, c, stage, bundle)
		if err == nil {
			t.Fatal("want a failure")
		}
		t.Log(err)
		for _, want := range []string{"did not finish within 5s", "was not scheduled (Unschedulable)", "node affinity/selector"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})

	t.Run("a Job past its own deadline fails with the Job's reason", func(t *testing.T) {
		c := check("deadline", time.Minute, map[string]any{"nodeSelector": map[string]any{"fluxd.io/no-such-node": "true"}})
		c.Job.Template["activeDeadlineSeconds"] = 2
		err := g.Run(ctx, c, stage, bundle)
		if err == nil {
			t.Fatal("want a failure")
		}
		t.Log(err)
		for _, want := range []string{"failed (DeadlineExceeded", "FailedScheduling", "node affinity/selector"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})

	t.Run("a stage in a namespace that does not exist", func(t *testing.T) {
		st := promotion.Stage{Name: "staging", Services: []platform.ID{{Namespace: "gates-nowhere", Kind: "deployment", Name: "web"}}}
		err := g.Run(ctx, check("smoke", time.Minute, map[string]any{}), st, bundle)
		if err == nil || !strings.Contains(err.Error(), "namespace gates-nowhere") || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("want a failure saying the namespace does not exist, got %v", err)
		}
		t.Log(err)
	})

	t.Run("a service account without RBAC is told what it needs", func(t *testing.T) {
		rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":nobody"}
		weak := gates.New(kubernetes.NewForConfigOrDie(rc))
		err = weak.Run(ctx, check("smoke-rbac", time.Minute, map[string]any{}), stage, bundle)
		if err == nil {
			t.Fatal("want a failure")
		}
		t.Log(err)
		for _, want := range []string{"may not create jobs.batch in namespace " + ns, "RoleBinding", "list on pods"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})
}

// TestJobCheckOnTheRealNode is issue 32's "a job check runs on the real
// node, and fails with its pod's reason": a container that really exits
// with status 3, and an image no node can pull. (Written without a run
// on the real node: the helper that wrote it was not to run real-node
// tests.)
func TestJobCheckOnTheRealNode(t *testing.T) {
	kc := requireRealNode(t)
	ctx := testContext(t)
	const ns = "gates-realnode"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crash, err := stack.PushAppImage(ctx, "gates-job", "1.0.0-crash", localstack.AppCrash)
	if err != nil {
		t.Fatal(err)
	}
	unpullable, err := stack.UnpullableAppImage(ctx, "gates-job", "1.0.0-unpullable")
	if err != nil {
		t.Fatal(err)
	}
	tol, sel := localstack.OnRealNode()
	g := gates.New(kc, gates.WithJobPoll(500*time.Millisecond))
	stage := promotion.Stage{Name: "staging", Services: []platform.ID{{Namespace: ns, Kind: "deployment", Name: "web"}}}
	bundle := promotion.Bundle{ID: "0123456789ab", Pipeline: "web"}
	check := func(name, image string, timeout time.Duration) promotion.Check {
		var tols []any
		for _, t := range tol {
			tols = append(tols, map[string]any{"key": t.Key, "operator": string(t.Operator), "effect": string(t.Effect)})
		}
		nodeSel := map[string]any{}
		for k, v := range sel {
			nodeSel[k] = v
		}
		return promotion.Check{Name: name, Job: &promotion.JobCheck{Timeout: timeout, Template: map[string]any{"template": map[string]any{"spec": map[string]any{
			"tolerations": tols, "nodeSelector": nodeSel,
			"containers": []any{map[string]any{"name": "smoke", "image": image}},
		}}}}}
	}

	t.Run("a container that exits 3 fails the check with its exit code", func(t *testing.T) {
		err := g.Run(ctx, check("crash", crash, 90*time.Second), stage, bundle)
		if err == nil {
			t.Fatal("want a failure")
		}
		t.Log(err)
		for _, want := range []string{"failed (BackoffLimitExceeded", "container smoke exited with code 3"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
	})

	t.Run("an image that cannot be pulled fails at the timeout saying so", func(t *testing.T) {
		err := g.Run(ctx, check("unpullable", unpullable, 45*time.Second), stage, bundle)
		if err == nil {
			t.Fatal("want a failure")
		}
		t.Log(err)
		if !strings.Contains(err.Error(), "did not finish within 45s") ||
			!(strings.Contains(err.Error(), "ImagePullBackOff") || strings.Contains(err.Error(), "ErrImagePull")) {
			t.Errorf("the failure %q does not say the timeout and ImagePullBackOff or ErrImagePull", err)
		}
	})
}
