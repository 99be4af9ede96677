package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/localstack"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
)

// BenchmarkAPILoad is ListServices under load, on the local stack: 1,000
// workloads (Deployments of 0 replicas in namespace bench-api, each also
// in git) running 100 repositories of 1,000 tags that fluxd's cache knows
// (read by a list-images of each before the load), and ghz, a gRPC load tool, with 50 concurrent clients making
// -api.calls calls against a fluxd built from this tree, and, when
// FLUXD_BASE names another fluxd binary (the commit before), against that
// one too, side by side. It prints requests per second, latency
// percentiles, fluxd's CPU per call and its resident memory after the
// run. GHZ names the ghz binary.
//
//	make bench-api                      (BENCH_API_BASE=784afeb^ by default: the commit before the kept view)
func BenchmarkAPILoad(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	ghz := os.Getenv("GHZ")
	if ghz == "" {
		b.Skip("GHZ is not set: run make bench-api, which installs ghz")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	apiLoadOnce(b, ctx)
	fluxds := []struct{ name, path string }{{"this tree", filepath.Join(binDir, "fluxd")}}
	if base := os.Getenv("FLUXD_BASE"); base != "" {
		fluxds = append([]struct{ name, path string }{{"base (" + os.Getenv("FLUXD_BASE_REV") + ")", base}}, fluxds...)
	}
	for b.Loop() {
		for i, fd := range fluxds {
			db := filepath.Join(b.TempDir(), "history.db")
			if err := seedRegistryCache(ctx, db); err != nil {
				b.Fatal(err)
			}
			metrics, err := localstack.FreeAddr()
			if err != nil {
				b.Fatal(err)
			}
			f, err := stack.StartNamedFluxd(ctx, fmt.Sprintf("fluxd-apiload-%d", i), fd.path, instance, nil,
				"--git-path=bench-api", "--history-db="+db, "--metrics-listen="+metrics, "--automation-long-wait=10m", "--automation-short-wait=10m", "--git-poll-interval=10m")
			if err != nil {
				b.Fatalf("starting %s: %v (log: %s)", fd.name, err, stack.Log(fmt.Sprintf("fluxd-apiload-%d", i)))
			}
			// Warm up: the caches filled and the first read of git done.
			c := fluxdv1.NewFluxServiceClient(dial(b, f.Addr))
			cctx := withToken(ctx, f.Tokens["viewer"])
			for range 3 {
				resp, err := c.ListServices(cctx, &fluxdv1.ListServicesRequest{Namespace: "bench-api"})
				if err != nil || len(resp.GetServices()) != 1000 {
					b.Fatalf("%s lists %d bench-api services: %v", fd.name, len(resp.GetServices()), err)
				}
			}
			// list-images of one service per repository: fluxd reads the
			// 100,000 cached tags (and lists each repository).
			for r := range apiRepos {
				resp, err := c.ListImages(cctx, &fluxdv1.ListImagesRequest{Service: fmt.Sprintf("bench-api/svc-%04d", r), Limit: 3})
				if err != nil {
					b.Fatalf("list-images: %v", err)
				}
				if ci := resp.GetServices()[0].GetContainers()[0]; ci.GetTotal() != apiTagsPerRepo || (ci.GetTimesRead() != 0 && ci.GetTimesRead() != apiTagsPerRepo) {
					b.Fatalf("list-images of svc-%04d: %d tags, %d read, %s", r, ci.GetTotal(), ci.GetTimesRead(), ci.GetError())
				}
			}
			// CPU is counted from here: the warm-up and the list-images
			// above are not ListServices calls.
			cpu0 := cpuSeconds(f.PID)
			r := runGhz(b, ghz, f.Addr, f.Tokens["viewer"])
			// fluxd's own CPU per call: what the load costs fluxd, whatever
			// ghz (on the same cores) and other processes take.
			cpuPerCall := (cpuSeconds(f.PID) - cpu0) / float64(max(r.Count, 1)) * 1000
			rss := rssMB(f.PID)
			heap := metricMB(b, metrics, "go_memstats_heap_inuse_bytes")
			fmt.Printf("ListServices, 1,000 workloads, 50 clients, %d calls: %-22s %6.0f req/s  p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms  errors %d  fluxd CPU %.2f ms/call  after: RSS %.0f MB, Go heap in use %.0f MB\n",
				r.Count, fd.name, r.Rps, r.percentile(50), r.percentile(90), r.percentile(99), len(r.ErrorDist), cpuPerCall, rss, heap)
			b.ReportMetric(heap, "heap-MB-"+strings.Fields(fd.name)[0])
			b.ReportMetric(cpuPerCall, "fluxd-cpu-ms/call-"+strings.Fields(fd.name)[0])
			// The same load from a Go client that does not decode the
			// answers: closer to what fluxd itself can serve, on cores
			// it shares with its load.
			raw := rawLoad(b, ctx, f.Addr, f.Tokens["viewer"], 50, apiCalls)
			fmt.Printf("  the same, a Go client not decoding the answers:  %6.0f req/s  p50 %6.1f ms  p90 %6.1f ms  p99 %6.1f ms\n", raw.rps, raw.p50, raw.p90, raw.p99)
			short := strings.Fields(fd.name)[0]
			b.ReportMetric(raw.rps, "raw-req/s-"+short)
			b.ReportMetric(raw.p99, "raw-p99-ms-"+short)
			b.ReportMetric(r.Rps, "req/s-"+short)
			b.ReportMetric(r.percentile(99), "p99-ms-"+short)
			b.ReportMetric(rss, "rss-MB-"+short)
			// This fluxd was started here: stop it by its own PID.
			_ = syscall.Kill(f.PID, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(f.PID, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

var apiCalls = 4000

// The registry side: the workloads run apiRepos repositories of
// apiTagsPerRepo tags each, 100,000 tags that fluxd's cache knows.
const apiRepos, apiTagsPerRepo = 100, 1000

// apiTag is the i-th tag of a bench-api repository: 1.0.0 to 1.9.99.
func apiTag(i int) string { return fmt.Sprintf("1.%d.%d", i/100, i%100) }

// pushAPIRepos pushes one image under every tag of every repository (a
// manifest PUT per tag: the layers are shared).
func pushAPIRepos(ctx context.Context) error {
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for r := range apiRepos {
		g.Go(func() error {
			repo, err := name.NewRepository(fmt.Sprintf("%s/bench-api/app-%d", stack.Registry, r), name.Insecure)
			if err != nil {
				return err
			}
			if err := remote.Write(repo.Tag(apiTag(0)), img, remote.WithContext(gctx)); err != nil {
				return err
			}
			for i := 1; i < apiTagsPerRepo; i++ {
				if err := remote.Tag(repo.Tag(apiTag(i)), img, remote.WithContext(gctx)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// seedRegistryCache writes a history database whose registry cache holds
// every bench-api tag (100,000), as a fluxd that has scanned them has:
// a digest, a creation time, a config digest and a platform each. The
// digests are made up (one per tag); fluxd trusts the cache for version
// tags, so it sends no request for them.
func seedRegistryCache(ctx context.Context, path string) error {
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer store.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for r := range apiRepos {
		tags, images := map[string]registry.TagState{}, map[string]registry.ImageMeta{}
		for i := range apiTagsPerRepo {
			d := fmt.Sprintf("sha256:%064x", r*apiTagsPerRepo+i)
			tags[apiTag(i)] = registry.TagState{Digest: d}
			images[d] = registry.ImageMeta{CreatedAt: t0.Add(time.Duration(i) * time.Minute), ConfigDigest: fmt.Sprintf("sha256:%064x", 1<<40+r*apiTagsPerRepo+i), Platform: "linux/amd64"}
		}
		if err := store.SaveTags(ctx, fmt.Sprintf("%s/bench-api/app-%d", stack.Registry, r), tags, images, nil); err != nil {
			return err
		}
	}
	return nil
}

// apiLoadOnce puts the 1,000 workloads in the cluster and in git, once.
func apiLoadOnce(b *testing.B, ctx context.Context) {
	b.Helper()
	kc := kubeClient(b)
	if _, err := kc.CoreV1().Namespaces().Get(ctx, "bench-api", metav1.GetOptions{}); err == nil {
		return
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-api"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var manifests strings.Builder
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		image := fmt.Sprintf("%s/bench-api/app-%d:1.0.0", stack.Registry, i%apiRepos)
		fmt.Fprintf(&manifests, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: bench-api
  annotations:
    fluxd.io/tag-all: "semver:^1"
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s
`, name, image)
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench-api"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}},
		}
		g.Go(func() error {
			_, err := kc.AppsV1().Deployments("bench-api").Create(gctx, d, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	pushManifest(b, "Add 1,000 workloads for the API load benchmark", map[string]string{"bench-api/workloads.yaml": manifests.String()})
	start := time.Now()
	if err := pushAPIRepos(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("pushed %d repositories x %d tags in %v", apiRepos, apiTagsPerRepo, time.Since(start).Round(time.Second))
}

// cpuSeconds is the user and system CPU time a process has used, from
// /proc (clock ticks of 1/100 s, as on Linux everywhere fluxd's stack runs).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	var utime, stime float64
	fmt.Sscanf(fields[11], "%f", &utime)
	fmt.Sscanf(fields[12], "%f", &stime)
	return (utime + stime) / 100
}

// rawCodec encodes requests as protobuf and keeps answers as bytes.
type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

type rawResult struct{ rps, p50, p90, p99 float64 }

// rawLoad makes calls ListServices calls from clients goroutines over one
// connection each, keeping the answers undecoded.
func rawLoad(b *testing.B, ctx context.Context, addr, token string, clients, calls int) rawResult {
	b.Helper()
	codec := rawCodec{encoding.GetCodecV2("proto")}
	lat := make([]time.Duration, calls)
	var next atomic.Int64
	start := time.Now()
	g, gctx := errgroup.WithContext(withToken(ctx, token))
	for range clients {
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec)))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		g.Go(func() error {
			for {
				i := next.Add(1) - 1
				if i >= int64(calls) {
					return nil
				}
				t0 := time.Now()
				var out []byte
				if err := conn.Invoke(gctx, fluxdv1.FluxService_ListServices_FullMethodName, &fluxdv1.ListServicesRequest{}, &out); err != nil {
					return err
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(p int) float64 { return float64(lat[len(lat)*p/100]) / 1e6 }
	return rawResult{rps: float64(calls) / elapsed.Seconds(), p50: ms(50), p90: ms(90), p99: ms(99)}
}

// metricMB reads a metric in bytes from fluxd's metrics page, in MB.
func metricMB(b *testing.B, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f / (1 << 20)
		}
	}
	return -1
}

// rssMB is a process's resident set size, from /proc.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}

// ghzReport is what ghz's JSON output says of a run.
type ghzReport struct {
	Count     int64   `json:"count"`
	Rps       float64 `json:"rps"`
	Latencies []struct {
		Percentage int     `json:"percentage"`
		Latency    float64 `json:"latency"` // nanoseconds
	} `json:"latencyDistribution"`
	ErrorDist map[string]int `json:"errorDistribution"`
}

func (r ghzReport) percentile(p int) float64 {
	for _, l := range r.Latencies {
		if l.Percentage == p {
			return l.Latency / 1e6
		}
	}
	return -1
}

func runGhz(b *testing.B, ghz, addr, token string) ghzReport {
	b.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(ghz, "--insecure", "--import-paths", filepath.Join(root, "proto"), "--proto", filepath.Join(root, "proto/fluxd/v1/fluxd.proto"),
		"--call", "fluxd.v1.FluxService/ListServices", "--metadata", `{"authorization":"Bearer `+token+`"}`,
		"-c", "50", "-n", fmt.Sprint(apiCalls), "--format", "json", addr)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("ghz: %v\n%s", err, out)
	}
	var r ghzReport
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("reading ghz's report: %v\n%.500s", err, out)
	}
	return r
}
