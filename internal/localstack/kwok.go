package localstack

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kwokStages are the stack's own pod stages.
//
//go:embed kwok/*.yaml
var kwokStages embed.FS

// kwokAnnotation marks the nodes kwok manages.
const kwokAnnotation = "kwok.x-k8s.io/node"

func (s *Stack) client() (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	return kubernetes.NewForConfig(rc)
}

func (s *Stack) startKwok(ctx context.Context) error {
	stock, err := filepath.Glob(filepath.Join(filepath.Dir(s.opts.BinDir), "kwok-stages", "*.yaml"))
	if err != nil || len(stock) == 0 {
		return fmt.Errorf("no kwok stage files next to %s (run stack/build.sh)", s.opts.BinDir)
	}
	// kwok's stock stages, but our own pod-ready, which leaves pods of
	// "broken" images to pod-never-ready.
	var stages []string
	for _, f := range stock {
		if filepath.Base(f) != "pod-fast-pod-ready.yaml" {
			stages = append(stages, f)
		}
	}
	for _, name := range []string{"pod-ready.yaml", "pod-never-ready.yaml"} {
		b, err := kwokStages.ReadFile("kwok/" + name)
		if err != nil {
			return err
		}
		p := filepath.Join(s.Dir, "kwok-"+name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		stages = append(stages, p)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + s.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
	}
	for _, st := range stages {
		args = append(args, "--config="+st)
	}
	p, err := s.spawn("kwok", s.bin("kwok"), args...)
	if err != nil {
		return err
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	for i := 0; i < s.opts.Nodes; i++ {
		if err := createNode(ctx, c, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	return waitFor(ctx, p, 60*time.Second, "fake nodes Ready", func() error {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
					ready++
				}
			}
		}
		if ready < s.opts.Nodes {
			return fmt.Errorf("%d of %d nodes Ready and untainted", ready, s.opts.Nodes)
		}
		return nil
	})
}

func createNode(ctx context.Context, c kubernetes.Interface, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}
