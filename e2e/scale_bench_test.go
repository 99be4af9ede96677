package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/memlimit"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
)

// BenchmarkScale runs fluxd at each size BENCH_SCALE names (workload
// counts, default "1000,10000"), one after the other in one command, so
// that each size's costs stand beside the others'. A size of N is:
//
//   - N Deployments (0 replicas: no pods) in N/100 namespaces, in git
//     under scale-N/ with their Namespaces: N+N/100 sync objects, applied
//     by fluxd's own sync (--sync-interval), all automated under
//     semver:^1 and running their repository's newest tag;
//   - N/10 repositories of BENCH_SCALE_TAGS tags (default 100), pushed to
//     the stack's registry and known to fluxd's cache (seeded in its
//     history database, as a fluxd that scanned them has them).
//
// Per size it reports: the first automator pass (from fluxd's start
// until every automated service has a decision), the first sync (which
// creates everything), a sync that finds nothing changed (and its API
// requests), `release --all --update-all-images --dry-run` (three
// plans), list-services p50/p99 (50 workers for 10 s, all namespaces,
// gRPC, not decoded), fluxd's RSS and Go heap at the end, and then the
// first pass of a fluxd restarted on the same history store (the tag
// lists the first read are kept there; the metadata was seeded). fluxd runs
// with --kube-api-qps=1000, so that the first sync's creation of N
// objects measures the API server rather than the client's rate limit.
//
// fluxd gets the soft memory limit the installed Deployment gives it:
// GOMEMLIMIT set to --memory-limit-ratio's default share of
// deploy/deployment.yaml's limits.memory, the value fluxd derives from
// its container's cgroup (internal/memlimit). Only fluxd gets it: the
// stack's own Go processes do not. BENCH_SCALE_MEMLIMIT=none runs fluxd
// without it (as before fluxd set one).
//
//	FLUXD_STACK_BIN=... go test -run '^$' -bench BenchmarkScale -benchtime 1x -timeout 60m ./e2e/
//	BENCH_SCALE=1000,3000 ...           (the sizes to run)
func BenchmarkScale(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	sizes := []int{1000, 10000}
	if v := os.Getenv("BENCH_SCALE"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 100 || n%100 != 0 {
				b.Fatalf("BENCH_SCALE=%q: each size is a workload count, a multiple of 100 (1000,10000)", v)
			}
			sizes = append(sizes, n)
		}
	}
	tags := 100
	if v := os.Getenv("BENCH_SCALE_TAGS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			b.Fatalf("BENCH_SCALE_TAGS=%q: a number of tags per repository, 1 to 1000", v)
		}
		tags = n
	}
	var mem scaleMemory
	if v := os.Getenv("BENCH_SCALE_RATIO"); v != "" {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			b.Fatalf("BENCH_SCALE_RATIO=%q: fluxd's --memory-limit-ratio, a number from 0 to 1", v)
		}
		mem.ratio = v
	}
	switch v := os.Getenv("BENCH_SCALE_MEMLIMIT"); v {
	case "", "deploy", "cgroup":
		limit, err := deploymentMemoryLimit()
		if err != nil {
			b.Fatal(err)
		}
		if v == "cgroup" {
			if err := canLimitMemory(); err != nil {
				b.Fatalf("BENCH_SCALE_MEMLIMIT=cgroup: %v", err)
			}
			mem.cgroupLimit = limit
			switch c := os.Getenv("BENCH_SCALE_CGROUP_BINARY"); c {
			case "", "charged":
				mem.chargeBinary = true
			case "shared":
			default:
				b.Fatalf("BENCH_SCALE_CGROUP_BINARY=%q: charged (the default: fluxd's binary read into the page cache from inside its cgroup) or shared (its pages charged where they were first read)", c)
			}
			b.Logf("fluxd runs in a memory cgroup limited to deploy/deployment.yaml's limits.memory (%d bytes), which it reads itself", limit)
			break
		}
		mem.goMemLimit = strconv.FormatInt(memlimit.Soft(limit, memlimit.DefaultRatio), 10)
		b.Logf("fluxd runs with GOMEMLIMIT=%s: %.2f of deploy/deployment.yaml's limits.memory (%d bytes)", mem.goMemLimit, memlimit.DefaultRatio, limit)
	case "none":
	default:
		b.Fatalf("BENCH_SCALE_MEMLIMIT=%q: deploy (the default: GOMEMLIMIT as the installed Deployment's limit gives fluxd), cgroup (fluxd in a memory cgroup with that limit, as in its container) or none", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	for b.Loop() {
		var rows []string
		for _, n := range sizes {
			r := scaleRun(b, ctx, n, tags, mem)
			rows = append(rows, r.String())
			fmt.Println(r.String())
			b.ReportMetric(r.rss, fmt.Sprintf("rss-MB-%d", n))
			b.ReportMetric(r.peakRSS, fmt.Sprintf("peak-rss-MB-%d", n))
			b.ReportMetric(r.runPeakRSS, fmt.Sprintf("run-peak-rss-MB-%d", n))
			b.ReportMetric(r.heap, fmt.Sprintf("heap-MB-%d", n))
			b.ReportMetric(r.listP99, fmt.Sprintf("list-p99-ms-%d", n))
			b.ReportMetric(r.plan.Seconds(), fmt.Sprintf("plan-s-%d", n))
			b.ReportMetric(r.automator.Seconds(), fmt.Sprintf("automator-pass-s-%d", n))
			b.ReportMetric(r.restartPass.Seconds(), fmt.Sprintf("restart-pass-s-%d", n))
			b.ReportMetric(r.noChangeSync.Seconds(), fmt.Sprintf("nochange-sync-s-%d", n))
			b.ReportMetric(r.gcCPU, fmt.Sprintf("gc-cpu-s-%d", n))
			b.ReportMetric(r.cpu, fmt.Sprintf("cpu-s-%d", n))
			if r.cgroupPeak > 0 {
				b.ReportMetric(r.cgroupPeak, fmt.Sprintf("cgroup-peak-MB-%d", n))
			}
		}
		fmt.Println("\nBenchmarkScale, side by side:")
		fmt.Println(scaleHeader)
		for _, r := range rows {
			fmt.Println(r)
		}
	}
}

const scaleHeader = "| workloads | namespaces | repos x tags | RSS (peak at start; peak over the run) | Go heap in use (before list-services; peak at start) | list-services p50 / p99 (req/s) | release --all --dry-run | first automator pass (registry requests) | first pass after a restart (requests) | first sync | no-change sync (requests) | fluxd CPU (of it GC) |\n|---|---|---|---|---|---|---|---|---|---|---|---|"

type scaleResult struct {
	n, namespaces, repos, tags int
	rss, heap, heapBefore      float64
	peakRSS, peakHeap          float64 // sampled during the first automator pass and start-up sync
	runPeakRSS                 float64 // sampled every 250 ms from start to end
	listP50, listP99, listRPS  float64
	plan                       time.Duration // median of three
	planItems                  int
	automator                  time.Duration
	decisions                  float64
	passRequests               float64 // registry requests by the pass's end
	// The first pass of a fluxd restarted on the same store at the end.
	restartPass             time.Duration
	restartRequests         float64
	firstSync, noChangeSync time.Duration
	noChangeRequests        float64
	cpu, gcCPU              float64 // seconds, from start to the end of the list-services load
	// In a memory cgroup (BENCH_SCALE_MEMLIMIT=cgroup): its peak usage as
	// the kernel counts it, and how often it hit the limit.
	cgroupPeak    float64
	cgroupFailcnt int64
}

// scaleMemory is the memory limit a run gives fluxd: GOMEMLIMIT in its
// environment, or a memory cgroup it reads (at most one).
type scaleMemory struct {
	goMemLimit  string
	cgroupLimit int64
	// chargeBinary charges the binary's page cache to the cgroup
	// (BENCH_SCALE_CGROUP_BINARY=charged, the default; shared leaves it
	// where it was first read; see inMemoryCgroup).
	chargeBinary bool
	// ratio is fluxd's --memory-limit-ratio (BENCH_SCALE_RATIO), "" for
	// its default.
	ratio string
}

func (r scaleResult) String() string {
	return fmt.Sprintf("| %d | %d | %d x %d | %.0f MB (%.0f MB; %.0f MB) | %.0f MB (%.0f MB; %.0f MB) | %.0f / %.0f ms (%.0f) | %.2f s (%d services) | %.1f s (%.0f decisions; %.0f) | %.1f s (%.0f) | %.1f s | %.2f s (%.0f) | %.0f s (%.0f s) |",
		r.n, r.namespaces, r.repos, r.tags, r.rss, r.peakRSS, r.runPeakRSS, r.heap, r.heapBefore, r.peakHeap, r.listP50, r.listP99, r.listRPS, r.plan.Seconds(), r.planItems,
		r.automator.Seconds(), r.decisions, r.passRequests, r.restartPass.Seconds(), r.restartRequests, r.firstSync.Seconds(), r.noChangeSync.Seconds(), r.noChangeRequests, r.cpu, r.gcCPU)
}

// scaleRun sets up size n (once per stack) and measures a fresh fluxd on it.
func scaleRun(b *testing.B, ctx context.Context, n, tags int, mem scaleMemory) scaleResult {
	b.Helper()
	r := scaleResult{n: n, namespaces: n / 100, repos: max(1, n/10), tags: tags}
	prefix := fmt.Sprintf("scale-%d", n)
	repoName := func(i int) string { return fmt.Sprintf("%s/%s/app-%d", stack.Registry, prefix, i) }
	tag := func(i int) string { return fmt.Sprintf("1.0.%d", i) }
	kc := kubeClient(b)
	if _, err := kc.CoreV1().Namespaces().Get(ctx, prefix+"-ns-000", metav1.GetOptions{}); err != nil {
		start := time.Now()
		if err := pushScaleRepos(ctx, r.repos, tags, repoName, tag); err != nil {
			b.Fatal(err)
		}
		b.Logf("size %d: pushed %d repositories x %d tags in %v", n, r.repos, tags, time.Since(start).Round(time.Second))
		files := map[string]string{}
		for ns := range r.namespaces {
			var m strings.Builder
			nsName := fmt.Sprintf("%s-ns-%03d", prefix, ns)
			fmt.Fprintf(&m, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", nsName)
			for j := range 100 {
				i := ns*100 + j
				fmt.Fprintf(&m, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: %[2]s
  annotations:
    fluxd.io/automated: "true"
    fluxd.io/tag-all: "semver:^1"
spec:
  replicas: 0
  selector:
    matchLabels: {app: app-%[1]d}
  template:
    metadata:
      labels: {app: app-%[1]d}
    spec:
      containers:
        - name: app
          image: %[3]s:%[4]s
`, i, nsName, repoName(i%r.repos), tag(tags-1))
			}
			files[fmt.Sprintf("%s/%s.yaml", prefix, nsName)] = m.String()
		}
		pushManifest(b, fmt.Sprintf("Add %d workloads for the scale benchmark", n), files)
	}
	db := filepath.Join(b.TempDir(), "history.db")
	if err := seedScaleCache(ctx, db, r.repos, tags, repoName, tag, os.Getenv("BENCH_SCALE_LISTS") != "read"); err != nil {
		b.Fatal(err)
	}
	metrics, err := localstack.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("fluxd-scale-%d", n)
	t0 := time.Now()
	args := []string{"--git-path=" + prefix, "--history-db=" + db, "--metrics-listen=" + metrics, "--sync-interval=1h", "--kube-api-qps=1000", "--kube-api-burst=1000",
		"--sync-timeout=30m", "--automation-long-wait=1h", "--automation-short-wait=1h", "--git-poll-interval=1h"}
	if mem.ratio != "" {
		args = append(args, "--memory-limit-ratio="+mem.ratio)
	}
	profDir := os.Getenv("BENCH_SCALE_PPROF")
	if profDir != "" {
		args = append(args, "--pprof")
	}
	if mem.goMemLimit != "" {
		// fluxd inherits the environment when it starts; the stack's
		// processes started before, and nothing else starts meanwhile.
		os.Setenv("GOMEMLIMIT", mem.goMemLimit)
	}
	bin := filepath.Join(binDir, "fluxd")
	var cg *memoryCgroup
	if mem.cgroupLimit > 0 {
		var err error
		if cg, bin, err = inMemoryCgroup(fmt.Sprintf("fluxd-scale-%d-%d", n, os.Getpid()), mem.cgroupLimit, bin, b.TempDir(), mem.chargeBinary); err != nil {
			b.Fatal(err)
		}
	}
	f, err := stack.StartNamedFluxd(ctx, name, bin, instance, nil, args...)
	os.Unsetenv("GOMEMLIMIT")
	if err != nil {
		b.Fatalf("starting fluxd: %v (log: %s)", err, stack.Log(name))
	}
	defer func() {
		// Started here: stopped here.
		f.Stop(syscall.SIGTERM, 10*time.Second)
		if cg != nil {
			if err := cg.remove(); err != nil {
				b.Log(err)
			}
		}
	}()
	if cg != nil {
		// fluxd found the limit itself, as in its container.
		waitForLog(b, name, "soft memory limit from the container's")
	}
	// RSS over the whole run, every 250 ms: a container's limit kills at
	// whichever moment the peak comes (the list-services load's too).
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	runPeak := make(chan float64, 1)
	go func() {
		var peak float64
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, rssMB(f.PID))
			select {
			case <-sampling.Done():
				runPeak <- peak
				return
			case <-t.C:
			}
		}
	}()
	conn := dial(b, f.Addr)
	c := fluxdv1.NewFluxServiceClient(conn)
	admin := withToken(ctx, f.Tokens["admin"])

	// The first automator pass: every automated service decided. The
	// start-up sync, which creates the objects, runs meanwhile: RSS and
	// the heap are sampled for their peak (and, profiling, the heap
	// profile at the highest heap kept).
	// Profiling: fluxd's CPU over the pass's first 30 s.
	stopPassProf := profile(b, profDir != "", metrics, profDir, fmt.Sprintf("scale-%d-first-pass", n), 30*time.Second)
	lastSample := time.Time{}
	dumped := 0 // goroutine dumps taken during the pass (profiling: at 5, 10 and 20 s)
	for {
		if profDir != "" && dumped < 3 && time.Since(t0) > []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}[dumped] {
			dumped++
			fetchProfile(b, metrics, "/debug/pprof/goroutine?debug=2", filepath.Join(profDir, fmt.Sprintf("scale-%d-first-pass-%d.goroutines.txt", n, dumped)))
		}
		if time.Since(lastSample) > time.Second {
			lastSample = time.Now()
			r.peakRSS = max(r.peakRSS, rssMB(f.PID))
			if h := metricMB(b, metrics, "go_memstats_heap_inuse_bytes"); h > r.peakHeap {
				r.peakHeap = h
				if profDir != "" {
					fetchProfile(b, metrics, "/debug/pprof/heap", filepath.Join(profDir, fmt.Sprintf("scale-%d-peak.heap.pprof", n)))
				}
			}
		}
		r.decisions = metricTotal(b, metrics, "fluxd_automation_decisions_total")
		if r.decisions >= float64(n) {
			r.automator = time.Since(t0)
			r.passRequests = metricTotal(b, metrics, "fluxd_registry_requests_total")
			break
		}
		if time.Since(t0) > 30*time.Minute {
			b.Fatalf("size %d: after 30 min the automator decided %.0f services of %d (log: %s)", n, r.decisions, n, stack.Log(name))
		}
		// (Each read of the metrics costs fluxd an encoding of them all:
		// read every 200 ms, that was a tenth of its CPU in the pass.)
		time.Sleep(500 * time.Millisecond)
	}
	stopPassProf()
	// The first sync (creates what the stack does not have yet), then one
	// that finds nothing changed.
	sctx, scancel := context.WithTimeout(admin, 40*time.Minute)
	defer scancel()
	start := time.Now()
	resp, err := c.Sync(sctx, &fluxdv1.SyncRequest{})
	if err != nil || resp.GetError() != "" {
		b.Fatalf("size %d: first sync: %v %s (log: %s)", n, err, resp.GetError(), stack.Log(name))
	}
	r.firstSync = time.Since(start)
	if len(resp.GetObjects()) < n {
		b.Fatalf("size %d: the first sync reports %d objects, want at least %d", n, len(resp.GetObjects()), n)
	}
	// Profiling: fluxd's CPU over the no-change sync (and a little after).
	stopSyncProf := profile(b, profDir != "", metrics, profDir, fmt.Sprintf("scale-%d-nochange-sync", n), 6*time.Second)
	start = time.Now()
	if resp, err = c.Sync(sctx, &fluxdv1.SyncRequest{}); err != nil || resp.GetError() != "" {
		b.Fatalf("size %d: second sync: %v %s", n, err, resp.GetError())
	}
	r.noChangeSync = time.Since(start)
	stopSyncProf()
	r.noChangeRequests = metricTotal(b, metrics, "fluxd_sync_kube_requests")

	// release --all --update-all-images --dry-run, three times.
	var plans []time.Duration
	for range 3 {
		start := time.Now()
		resp, err := c.Release(admin, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true}})
		if err != nil {
			b.Fatalf("size %d: release --all --update-all-images --dry-run: %v", n, err)
		}
		plans = append(plans, time.Since(start))
		r.planItems = len(resp.GetPlan().GetItems())
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i] < plans[j] })
	r.plan = plans[1]

	r.heapBefore = metricMB(b, metrics, "go_memstats_heap_inuse_bytes")
	if profDir != "" {
		fetchProfile(b, metrics, "/debug/pprof/heap?gc=1", filepath.Join(profDir, fmt.Sprintf("scale-%d-before-list.heap.pprof", n)))
	}
	// list-services, all namespaces.
	stopProf := profile(b, profDir != "", metrics, profDir, fmt.Sprintf("scale-%d-list", n), 10*time.Second)
	ls := rawLoadReq(b, ctx, f.Addr, f.Tokens["viewer"], apiWorkers, 10*time.Second, &fluxdv1.ListServicesRequest{})
	stopProf()
	if profDir != "" {
		fetchProfile(b, metrics, "/debug/pprof/heap", filepath.Join(profDir, fmt.Sprintf("scale-%d-end.heap.pprof", n)))
	}
	if ls.success < 1 {
		b.Fatalf("size %d: list-services failed: %v", n, ls.errors)
	}
	r.listP50, r.listP99, r.listRPS = ls.p50, ls.p99, ls.rps
	r.rss = rssMB(f.PID)
	stopSampling()
	r.runPeakRSS = max(<-runPeak, r.rss)
	r.heap = metricMB(b, metrics, "go_memstats_heap_inuse_bytes")
	// What GOMEMLIMIT bounds (the runtime's memory less what it returned
	// to the kernel) against RSS: the rest is outside Go's count.
	goMem := metricMB(b, metrics, "go_memstats_sys_bytes") - metricMB(b, metrics, "go_memstats_heap_released_bytes")
	b.Logf("size %d: RSS %.0f MB (anonymous %.0f MB, file-backed %.0f MB), of it the Go runtime's %.0f MB (sys less released), outside Go's count %.0f MB (MB here: MiB)",
		n, r.rss, procStatusMB(f.PID, "RssAnon:"), procStatusMB(f.PID, "RssFile:"), goMem, r.rss-goMem)
	if cg != nil {
		st := cg.stats()
		if st.oomKills > 0 || f.Exited() {
			b.Fatalf("size %d: the kernel killed fluxd at its memory limit (%d OOM kills; log: %s)", n, st.oomKills, stack.Log(name))
		}
		r.cgroupPeak, r.cgroupFailcnt = st.peakMB, st.failcnt
		b.Logf("size %d: the memory cgroup (limit %d MiB) peaked at %.0f MiB as the kernel counts it (page cache included), %d times at the limit (reclaimed), 0 OOM kills",
			n, mem.cgroupLimit>>20, st.peakMB, st.failcnt)
	}
	r.cpu = metricTotal(b, metrics, "process_cpu_seconds_total")
	r.gcCPU = metricTotal(b, metrics, "go_cpu_classes_gc_total_cpu_seconds_total")

	// A restart (an upgrade, a rescheduled pod) on the same history
	// store: its first pass again, now that the tag lists fluxd read are
	// kept there (fresh for --registry-list-min, doubling to
	// --registry-list-max while unchanged; the restart comes within it).
	f.Stop(syscall.SIGTERM, 30*time.Second)
	if mem.goMemLimit != "" {
		os.Setenv("GOMEMLIMIT", mem.goMemLimit)
	}
	t1 := time.Now()
	f, err = stack.StartNamedFluxd(ctx, name+"-restarted", bin, instance, nil, args...)
	os.Unsetenv("GOMEMLIMIT")
	if err != nil {
		b.Fatalf("restarting fluxd: %v (log: %s)", err, stack.Log(name+"-restarted"))
	}
	for {
		if d := metricTotal(b, metrics, "fluxd_automation_decisions_total"); d >= float64(n) {
			r.restartPass = time.Since(t1)
			r.restartRequests = metricTotal(b, metrics, "fluxd_registry_requests_total")
			break
		}
		if time.Since(t1) > 30*time.Minute {
			b.Fatalf("size %d: after 30 min the restarted fluxd had not decided every service (log: %s)", n, stack.Log(name+"-restarted"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return r
}

// procStatusMB is a "kB" field of /proc/PID/status in MiB; -1 when
// unread.
func procStatusMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}

// deploymentMemoryLimit is limits.memory of the fluxd container in
// deploy/deployment.yaml, in bytes.
func deploymentMemoryLimit() (int64, error) {
	root, err := localstack.ModuleRoot()
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "deployment.yaml"))
	if err != nil {
		return 0, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		return 0, fmt.Errorf("reading deploy/deployment.yaml: %w", err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "fluxd" {
			return m.Value(), nil
		}
	}
	return 0, errors.New("deploy/deployment.yaml: the fluxd container has no limits.memory")
}

// pushScaleRepos pushes one image under every tag of every repository.
func pushScaleRepos(ctx context.Context, repos, tags int, repoName func(int) string, tag func(int) string) error {
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for r := range repos {
		g.Go(func() error {
			repo, err := name.NewRepository(repoName(r), name.Insecure)
			if err != nil {
				return err
			}
			if err := remote.Write(repo.Tag(tag(0)), img, remote.WithContext(gctx)); err != nil {
				return err
			}
			for i := 1; i < tags; i++ {
				if err := remote.Tag(repo.Tag(tag(i)), img, remote.WithContext(gctx)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// seedScaleCache writes a history database whose registry cache holds
// every tag of the size's repositories (see seedRegistryCache) and, with
// lists, their tag lists as a fluxd that has run a while keeps them:
// read just now, the same for three reads in a row, so due again at
// --registry-list-max (5 min). The first pass then models a restart of
// such a fluxd; BENCH_SCALE_LISTS=read leaves the lists out (a store
// that never kept them: every list is read, at --registry-rate).
func seedScaleCache(ctx context.Context, path string, repos, tags int, repoName func(int) string, tag func(int) string, lists bool) error {
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer store.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for r := range repos {
		ts, images := map[string]registry.TagState{}, map[string]registry.ImageMeta{}
		for i := range tags {
			d := fmt.Sprintf("sha256:%064x", 1<<50+r*tags+i)
			ts[tag(i)] = registry.TagState{Digest: d}
			images[d] = registry.ImageMeta{CreatedAt: t0.Add(time.Duration(i) * time.Minute), ConfigDigest: fmt.Sprintf("sha256:%064x", 1<<51+r*tags+i), Platform: "linux/amd64"}
		}
		if err := store.SaveTags(ctx, repoName(r), ts, images, nil); err != nil {
			return err
		}
		if lists {
			names := slices.Sorted(maps.Keys(ts))
			now := time.Now()
			if err := store.SaveTagList(ctx, repoName(r), registry.TagList{Tags: names, Stable: 3, Next: now.Add(5 * time.Minute), ReadAt: now}); err != nil {
				return err
			}
		}
	}
	return nil
}

// metricTotal is the sum of a metric's samples (every label set) on fluxd's
// metrics page; 0 when it has none.
func metricTotal(b *testing.B, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, _ := strconv.ParseFloat(l[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// fetchProfile writes one of fluxd's profiles (--pprof) to file.
func fetchProfile(b *testing.B, metricsAddr, path, file string) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	resp, err := http.Get("http://" + metricsAddr + path)
	if err != nil {
		b.Errorf("profile %s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(file, body, 0o644); err != nil {
		b.Error(err)
	}
}
