package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fluxd/fluxd/internal/localstack"
)

// The real node is a Ready node whose runtime is containerd, and a pod of
// an image from the stack's registry really runs there: it turns Ready on
// its readiness probe, and its output is what 'kubectl logs' shows.
func TestRealNodeRunsAPod(t *testing.T) {
	kc := requireRealNode(t)
	ctx := testContext(t)
	node, err := kc.CoreV1().Nodes().Get(ctx, localstack.RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rt := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") {
		t.Errorf("node %s runtime %q, want containerd://", node.Name, rt)
	}
	image, err := stack.PushAppImage(ctx, "realnode-app", "1.0.0", localstack.AppServe)
	if err != nil {
		t.Fatal(err)
	}
	tol, sel := localstack.OnRealNode()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-app", Namespace: "default"},
		Spec: corev1.PodSpec{
			Tolerations: tol, NodeSelector: sel,
			Containers: []corev1.Container{{
				Name: "app", Image: image,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	err = poll(ctx, 90*time.Second, func() error {
		p, err := kc.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("pod %s: phase %s, %s", p.Name, p.Status.Phase, containerStates(p))
	})
	if err != nil {
		t.Fatalf("the pod never became Ready on the real node: %v", err)
	}
	logs, err := kc.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		t.Fatalf("kubectl logs: %v", err)
	}
	defer logs.Close()
	b, _ := io.ReadAll(logs)
	if !strings.Contains(string(b), `testapp 1.0.0: mode "serve"`) {
		t.Errorf("the pod's log is %q, want the program's first line", b)
	}
}

// containerStates says in one line what each container of p is doing.
func containerStates(p *corev1.Pod) string {
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			out = append(out, fmt.Sprintf("%s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			out = append(out, fmt.Sprintf("%s terminated: %s exit %d", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		case cs.State.Running != nil:
			out = append(out, fmt.Sprintf("%s running, ready=%v", cs.Name, cs.Ready))
		}
	}
	return strings.Join(out, "; ")
}
