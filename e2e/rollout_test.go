package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// A change made in the cluster really rolls out on the kwok nodes, and
// fluxd's informer caches follow it without a restart.
func TestClusterChangeRollsOutAndFluxdSeesIt(t *testing.T) {
	f := sharedFluxd(t)
	ctx := testContext(t)
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(rc)
	newImage := stack.Registry + "/redis:7.0.5"
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]any{{"name": "redis", "image": newImage}}}}}})
	if _, err := kc.AppsV1().Deployments("default").Patch(ctx, "redis", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		back, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": "redis", "image": stack.Registry + "/redis:7.0.0"}}}}}})
		_, _ = kc.AppsV1().Deployments("default").Patch(context.Background(), "redis", types.StrategicMergePatchType, back, metav1.PatchOptions{})
	})

	c := fluxdv1.NewFluxServiceClient(dial(t, f.Addr))
	vctx := withToken(ctx, f.Tokens["viewer"])
	err = poll(ctx, 60*time.Second, func() error {
		resp, err := c.ListServices(vctx, &fluxdv1.ListServicesRequest{Namespace: "default"})
		if err != nil {
			return err
		}
		for _, s := range resp.GetServices() {
			if s.GetId() != "default:deployment/redis" {
				continue
			}
			if img := s.GetContainers()[0].GetImage(); img != newImage {
				return fmt.Errorf("image %s", img)
			}
			if r := s.GetReplicas(); s.GetStatus() != "ready" || r.GetUpdated() != r.GetDesired() {
				return fmt.Errorf("status %s, replicas %v", s.GetStatus(), r)
			}
			return nil
		}
		return fmt.Errorf("redis not listed")
	})
	if err != nil {
		t.Fatalf("fluxd never reported redis rolled out to %s: %v", newImage, err)
	}
}

// fluxd's metrics show its registry traffic. The test makes some itself
// (a listing of helloworld's images) rather than count on the tests
// before it: make test deals the tests to shards, whose order varies.
func TestMetricsEndpoint(t *testing.T) {
	f := sharedFluxd(t)
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	if out, stderr, code := fluxctl(t, env, "list-images", "helloworld"); code != 0 {
		t.Fatalf("fluxctl list-images helloworld: exit %d\n%s%s", code, out, stderr)
	}
	wants := []string{
		`fluxd_registry_requests_total{host="` + stack.Registry + `",method="GET",status="200"}`,
		`fluxd_registry_cache_lookups_total{result="`,
		`fluxd_registry_rate_per_second{host="` + stack.Registry + `"} 100`,
		`fluxd_registry_scan_duration_seconds_count{host="` + stack.Registry + `"}`,
		`fluxd_registry_tags{repository="` + stack.Registry + `/helloworld"}`,
	}
	var missing []string
	err := poll(context.Background(), time.Minute, func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(string(body), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("/metrics lacks %s", strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
