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
	"github.com/fluxd/fluxd/internal/grpcwindow"
	"github.com/fluxd/fluxd/internal/localstack"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
)

// BenchmarkAPILoad is ListServices under load, on the local stack: 1,000
// workloads (Deployments of 0 replicas in namespace bench-api, each also
// in git) running 100 repositories of 1,000 tags that fluxd's cache knows
// (read by a list-images of each before the load). In one run, side by
// side, each for BENCH_API_DURATION (20s) at 50 workers:
//
//   - the kube-apiserver's cached LIST of the same 1,000 Deployments
//     (resourceVersion=0, its watch cache), through vegeta;
//   - fluxd's JSON API ListServices (the web listener), through vegeta,
//     the same HTTP/1.1 load: neither body decoded;
//   - fluxd's gRPC ListServices from a Go worker pool (50 workers, one
//     connection each) that does not decode the answers: vegeta speaks
//     no gRPC;
//   - with GHZ set, ghz (a decoding gRPC load tool) making -api.calls calls.
//
// It does so against a fluxd built from this tree and, when FLUXD_BASE
// names another fluxd binary (the commit before), against that one too.
// It prints requests per second, p50 and p99, the ratios to the API
// server, fluxd's CPU per call and its memory after the run. With
// BENCH_API_PPROF=DIR, this tree's fluxd runs with --pprof and a CPU
// profile and the allocations of each fluxd side are written to DIR.
//
//	make bench-api                      (BENCH_API_BASE=784afeb^ by default: the commit before the kept view)
func BenchmarkAPILoad(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	ghz := os.Getenv("GHZ")
	dur := apiDuration(b)
	profDir := os.Getenv("BENCH_API_PPROF")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	apiLoadOnce(b, ctx)
	apiTarget, apiTLS := apiServerList(b, "bench-api")
	fluxds := []struct{ name, path string }{{"this tree", filepath.Join(binDir, "fluxd")}}
	if base := os.Getenv("FLUXD_BASE"); base != "" {
		fluxds = append([]struct{ name, path string }{{"base (" + os.Getenv("FLUXD_BASE_REV") + ")", base}}, fluxds...)
	}
	for b.Loop() {
		for i, fd := range fluxds {
			short := strings.Fields(fd.name)[0]
			db := filepath.Join(b.TempDir(), "history.db")
			if err := seedRegistryCache(ctx, db); err != nil {
				b.Fatal(err)
			}
			metrics, err := localstack.FreeAddr()
			if err != nil {
				b.Fatal(err)
			}
			webAddr, err := localstack.FreeAddr()
			if err != nil {
				b.Fatal(err)
			}
			args := []string{"--git-path=bench-api", "--history-db=" + db, "--metrics-listen=" + metrics, "--web-listen=" + webAddr,
				"--automation-long-wait=10m", "--automation-short-wait=10m", "--git-poll-interval=10m"}
			profiling := profDir != "" && fd.path == filepath.Join(binDir, "fluxd")
			if profiling {
				args = append(args, "--pprof")
			}
			f, err := stack.StartNamedFluxd(ctx, fmt.Sprintf("fluxd-apiload-%d", i), fd.path, instance, nil, args...)
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
			checkJSONList(b, webAddr, f.Tokens["viewer"], 1000)
			fmt.Printf("\nListServices of 1,000 workloads, %d workers, %v each, fluxd %s:\n", apiWorkers, dur, fd.name)
			api := vegetaLoad(b, "kube-apiserver LIST ?resourceVersion=0 (vegeta)", apiTarget, apiTLS, dur)
			fmt.Println("  " + api.String())
			// CPU is counted per side: the warm-up, the list-images above
			// and the API server's side are not fluxd's calls.
			cpu0 := cpuSeconds(f.PID)
			stopProf := profile(b, profiling, metrics, profDir, short+"-json", dur)
			js := vegetaLoad(b, "fluxd JSON API ListServices (vegeta)", fluxdJSONList(webAddr, f.Tokens["viewer"], "bench-api"), nil, dur)
			stopProf()
			cpu1 := cpuSeconds(f.PID)
			stopProf = profile(b, profiling, metrics, profDir, short+"-grpc", dur)
			gr := rawLoad(b, ctx, f.Addr, f.Tokens["viewer"], apiWorkers, dur)
			stopProf()
			cpu2 := cpuSeconds(f.PID)
			jsCPU := (cpu1 - cpu0) / float64(max(js.requests, 1)) * 1000
			grCPU := (cpu2 - cpu1) / float64(max(gr.requests, 1)) * 1000
			fmt.Printf("  %s  fluxd CPU %.2f ms/call\n  %s  fluxd CPU %.2f ms/call\n", js, jsCPU, gr, grCPU)
			fmt.Printf("  ratio to the API server: JSON API %.2fx req/s, p99 %.2fx; gRPC %.2fx req/s, p99 %.2fx\n",
				js.rps/api.rps, js.p99/api.p99, gr.rps/api.rps, gr.p99/api.p99)
			b.ReportMetric(api.rps, "apiserver-req/s-"+short)
			b.ReportMetric(js.rps, "json-req/s-"+short)
			b.ReportMetric(js.p99, "json-p99-ms-"+short)
			b.ReportMetric(gr.rps, "grpc-req/s-"+short)
			b.ReportMetric(gr.p99, "grpc-p99-ms-"+short)
			b.ReportMetric(js.rps/api.rps, "json-x-apiserver-"+short)
			b.ReportMetric(gr.rps/api.rps, "grpc-x-apiserver-"+short)
			if ghz != "" {
				cpu3 := cpuSeconds(f.PID)
				r := runGhz(b, ghz, f.Addr, f.Tokens["viewer"])
				cpuPerCall := (cpuSeconds(f.PID) - cpu3) / float64(max(r.Count, 1)) * 1000
				fmt.Printf("  %-44s %7.1f req/s  p50 %7.1f ms  p99 %7.1f ms  %6d requests  errors %d  fluxd CPU %.2f ms/call\n",
					"fluxd gRPC ListServices (ghz, decoding)", r.Rps, r.percentile(50), r.percentile(99), r.Count, len(r.ErrorDist), cpuPerCall)
				b.ReportMetric(r.Rps, "ghz-req/s-"+short)
				b.ReportMetric(r.percentile(99), "ghz-p99-ms-"+short)
			}
			rss := rssMB(f.PID)
			heap := metricMB(b, metrics, "go_memstats_heap_inuse_bytes")
			fmt.Printf("  fluxd after the run: RSS %.0f MB, Go heap in use %.0f MB\n", rss, heap)
			b.ReportMetric(heap, "heap-MB-"+short)
			b.ReportMetric(rss, "rss-MB-"+short)
			// This fluxd was started here: stop it.
			f.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}
}

// checkJSONList checks that the JSON API lists want bench-api services
// before it is loaded: an error answer, fast, would otherwise count.
func checkJSONList(b *testing.B, webAddr, token string, want int) {
	b.Helper()
	t := fluxdJSONList(webAddr, token, "bench-api")
	req, err := t.Request()
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Services) != want {
		b.Fatalf("the JSON API's ListServices: %s, %d services, %v; want %d", resp.Status, len(out.Services), err, want)
	}
}

// profile, when on, reads a CPU profile of fluxd for the next d and its
// allocations over the same time (the allocs profile after, against the
// one before), into dir/NAME.cpu.pprof and dir/NAME.allocs{0,1}.pprof
// (go tool pprof -sample_index=alloc_space -base NAME.allocs0.pprof
// NAME.allocs1.pprof). The returned function waits for the CPU profile.
func profile(b *testing.B, on bool, metricsAddr, dir, name string, d time.Duration) func() {
	if !on {
		return func() {}
	}
	get := func(path, file string) {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			b.Errorf("profile %s: %v", path, err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(filepath.Join(dir, file), body, 0o644); err != nil {
			b.Errorf("profile %s: %v", path, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	get("/debug/pprof/allocs", name+".allocs0.pprof")
	done := make(chan struct{})
	go func() {
		defer close(done)
		get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds())-1)), name+".cpu.pprof")
	}()
	return func() {
		<-done
		get("/debug/pprof/allocs", name+".allocs1.pprof")
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

// rawLoad makes ListServices calls for d from workers goroutines over
// one connection each, keeping the answers undecoded: each worker sends
// its next call when its last is answered, as vegeta's workers do.
func rawLoad(b *testing.B, ctx context.Context, addr, token string, workers int, d time.Duration) sideResult {
	b.Helper()
	return rawLoadReq(b, ctx, addr, token, workers, d, &fluxdv1.ListServicesRequest{Namespace: "bench-api"})
}

// rawLoadReq is rawLoad with the request req.
func rawLoadReq(b *testing.B, ctx context.Context, addr, token string, workers int, d time.Duration, req *fluxdv1.ListServicesRequest) sideResult {
	b.Helper()
	codec := rawCodec{encoding.GetCodecV2("proto")}
	lats := make([][]time.Duration, workers)
	var bytesIn atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	g, gctx := errgroup.WithContext(withToken(ctx, token))
	for w := range workers {
		// fluxctl's windows and read buffer (internal/grpcwindow): the
		// load models fluxctl's calls.
		opts := append(grpcwindow.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec), grpc.MaxCallRecvMsgSize(64<<20)))
		conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		g.Go(func() error {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				var out []byte
				if err := conn.Invoke(gctx, fluxdv1.FluxService_ListServices_FullMethodName, req, &out); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
				bytesIn.Add(int64(len(out)))
			}
			return nil
		})
	}
	_ = g.Wait()
	elapsed := time.Since(start)
	var lat []time.Duration
	for _, l := range lats {
		lat = append(lat, l...)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := sideResult{name: "fluxd gRPC ListServices (Go pool, raw)", requests: uint64(len(lat)) + uint64(failed.Load())}
	if len(lat) > 0 {
		pct := func(p int) float64 { return float64(lat[min(len(lat)-1, len(lat)*p/100)]) / 1e6 }
		r.rps, r.p50, r.p99 = float64(len(lat))/elapsed.Seconds(), pct(50), pct(99)
		r.bytesPerReply = float64(bytesIn.Load()) / float64(len(lat))
	}
	if r.requests > 0 {
		r.success = float64(len(lat)) / float64(r.requests)
	}
	if e, ok := firstErr.Load().(string); ok {
		r.errors = []string{e}
	}
	return r
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
