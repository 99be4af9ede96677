package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxd/fluxd/internal/localstack"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// BenchmarkAutomationLatency measures, on the local stack, how long an
// automated release takes from an image push (with a notification) to
// the commit pushed, and to the rollout complete, for one one-replica
// service under a semver policy with ten-minute automation waits (so
// only the notification can start it). Each iteration is one push; run
// with -benchtime 20x for the median and p95 over 20 pushes:
//
//	make bench-automation
func BenchmarkAutomationLatency(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The benchmark function runs more than once (b.N = 1, then 20); the
	// service and its fluxd are set up once and left to the stack's end.
	benchOnce.Do(func() { benchEnv, benchErr = setUpLatencyBench(b) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	kc, c, cctx, app, t0 := benchEnv.kc, benchEnv.client, withToken(ctx, benchEnv.fluxd.Tokens["deployer"]), benchEnv.app, benchEnv.t0
	var toCommit, toRollout []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchEnv.pushes++
		tag := fmt.Sprintf("1.0.%d", benchEnv.pushes)
		b.StopTimer()
		if err := stack.PushImage(ctx, "benchapp", tag, t0.Add(time.Duration(benchEnv.pushes)*time.Minute)); err != nil {
			b.Fatal(err)
		}
		// Pushes come one at a time: the previous job has ended (it
		// notices the end of its rollout within its 250 ms poll).
		before := ""
		for {
			resp, err := c.ListJobs(cctx, &fluxdv1.ListJobsRequest{Limit: 1})
			if err != nil {
				b.Fatal(err)
			}
			js := resp.GetJobs()
			if len(js) == 0 || js[0].GetFinishedAt() != nil {
				if len(js) > 0 {
					before = js[0].GetId()
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := c.NotifyImage(cctx, &fluxdv1.NotifyImageRequest{Image: app + tag}); err != nil {
			b.Fatal(err)
		}
		committed := false
		for {
			if !committed {
				resp, err := c.ListJobs(cctx, &fluxdv1.ListJobsRequest{Limit: 1})
				if err != nil {
					b.Fatal(err)
				}
				if js := resp.GetJobs(); len(js) > 0 && js[0].GetId() != before && js[0].GetCommit() != "" {
					toCommit = append(toCommit, time.Since(start))
					committed = true
				}
			}
			dep, err := kc.AppsV1().Deployments("default").Get(ctx, "benchapp", metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if committed && dep.Spec.Template.Spec.Containers[0].Image == app+tag && rolledOut(dep) == nil {
				toRollout = append(toRollout, time.Since(start))
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("push %s: no rollout within a minute (log: %s)", tag, stack.Log("fluxd-bench"))
			}
			time.Sleep(5 * time.Millisecond)
			if !committed {
			}
		}
	}
	b.StopTimer()
	ms := func(ds []time.Duration, q float64) float64 {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(q*float64(len(s)-1)+0.5)]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(toCommit, 0.5), "commit-p50-ms")
	b.ReportMetric(ms(toCommit, 0.95), "commit-p95-ms")
	b.ReportMetric(ms(toRollout, 0.5), "rollout-p50-ms")
	b.ReportMetric(ms(toRollout, 0.95), "rollout-p95-ms")
	b.Logf("%d pushes: notification → commit pushed p50 %.0f ms, p95 %.0f ms; → rollout complete p50 %.0f ms, p95 %.0f ms",
		len(toCommit), ms(toCommit, 0.5), ms(toCommit, 0.95), ms(toRollout, 0.5), ms(toRollout, 0.95))
}

type latencyBench struct {
	kc     kubernetes.Interface
	client fluxdv1.FluxServiceClient
	app    string
	t0     time.Time
	fluxd  *localstack.Fluxd
	pushes int
}

var (
	benchOnce sync.Once
	benchEnv  *latencyBench
	benchErr  error
)

func setUpLatencyBench(b testing.TB) (*latencyBench, error) {
	ctx := context.Background()
	kc := kubeClient(b)
	app := stack.Registry + "/benchapp:"
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "benchapp", "1.0.0", t0); err != nil {
		return nil, err
	}
	labels := map[string]string{"app": "benchapp"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "benchapp", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: app + "1.0.0"}}}},
		},
	}
	if _, err := kc.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	pushManifest(b, "Add the bench service", map[string]string{"bench/benchapp.yaml": policyDeployment("benchapp", app+"1.0.0",
		map[string]string{"fluxd.io/automated": "true", "fluxd.io/automated-by": instance, "fluxd.io/tag-all": "semver:^1"})})
	f, err := stack.StartNamedFluxd(ctx, "fluxd-bench", filepath.Join(binDir, "fluxd"), instance, nil,
		"--git-path=bench", "--automation-long-wait=10m", "--automation-short-wait=10m", "--git-poll-interval=10m", "--rollout-timeout=60s")
	if err != nil {
		return nil, fmt.Errorf("%v (log: %s)", err, stack.Log("fluxd-bench"))
	}
	// Let the first pass (nothing newer) settle.
	time.Sleep(time.Second)
	// A connection of its own: dial's would close with the first run.
	conn, err := grpc.NewClient("passthrough:///"+f.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &latencyBench{kc: kc, client: fluxdv1.NewFluxServiceClient(conn), app: app, t0: t0, fluxd: f}, nil

}
