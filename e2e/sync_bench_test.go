package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fluxd/fluxd/internal/localstack"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// syncBenchObjects is how many objects the sync benchmark keeps in git:
// 500 ConfigMaps, 400 Services and 100 Deployments (of no replicas, so
// that the fake nodes' pods do not weigh on the measure), in 10 files,
// plus their Namespace.
const syncBenchObjects = 1000

// syncBenchManifests are the benchmark's files; mark is written into an
// annotation of every object, so that a new mark changes all 1,000.
func syncBenchManifests(ns, mark string) map[string]string {
	files := map[string]string{ns + "/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n"}
	var b strings.Builder
	for i := 0; i < syncBenchObjects; i++ {
		meta := fmt.Sprintf("metadata:\n  name: obj-%04d\n  namespace: %s\n  annotations: {bench/mark: %q}\n", i, ns, mark)
		switch {
		case i < 500:
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\n%sdata:\n  index: \"%d\"\n", meta, i)
		case i < 900:
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\n%sspec:\n  selector: {app: obj-%04d}\n  ports: [{port: 80, targetPort: 8080}]\n", meta, i)
		default:
			fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\n%sspec:\n  replicas: 0\n  selector:\n    matchLabels: {app: obj-%04d}\n  template:\n    metadata:\n      labels: {app: obj-%04d}\n    spec:\n      containers: [{name: app, image: %s/helloworld:1.0.0}]\n", meta, i, i, stack.Registry)
		}
		if i%100 == 99 {
			files[fmt.Sprintf("%s/objects-%d.yaml", ns, i/100)] = b.String()
			b.Reset()
		}
	}
	return files
}

var (
	syncBenchFds = map[string]*syncBenchEnv{}
	syncBenchMu  sync.Mutex
)

type syncBenchEnv struct {
	ns      string // the namespace and git path
	client  fluxdv1.FluxServiceClient
	fluxd   *localstack.Fluxd
	first   time.Duration // the first sync, creating (or adopting) every object
	marks   int
	metrics string // fluxd's metrics address
}

// BenchmarkSync1000Objects measures, on the local stack, a sync of 1,000
// objects of three kinds by a fluxd at its default client rate limit
// (--kube-api-qps=50, burst 100), beside Flux v2's way in the same run:
//
//   - fluxv2-ssa/unchanged: fluxcd/pkg/ssa's ApplyAllStaged, as
//     kustomize-controller reconciles (a read and a server-side dry run
//     per object, then an apply of those that differ), at Flux's own
//     default rate limit (qps 50, burst 300), of the same 1,000 objects in
//     a namespace of their own;
//   - fluxd/unchanged: a sync that finds git and the cluster equal (the
//     drift check every --sync-interval runs), reported with
//     x-fluxv2 (how many times faster than fluxv2-ssa/unchanged);
//   - fluxd/one-drifted: the same after a person edited one ConfigMap by
//     hand (untimed), which the sync must correct;
//   - fluxd/all-changed: a sync after a commit that changed all 1,000.
//
// Each fluxd sync is one Sync call, the git fetch included; the commit's
// push is not timed. kube-requests/op is what the API server received
// (fluxd's fluxd_sync_kube_requests, a counting transport for Flux v2's
// side). The first sync (every object created) is reported as
// first-sync-ms:
//
//	go test -run '^$' -bench BenchmarkSync1000Objects -benchtime 5x ./e2e/
func BenchmarkSync1000Objects(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	var fluxv2 time.Duration // per sync, for the ratio
	b.Run("fluxv2-ssa/unchanged", func(b *testing.B) {
		fluxv2 = benchFluxV2(b)
	})
	b.Run("fluxd/unchanged", func(b *testing.B) {
		env := syncBenchFluxd(b, "50")
		ctx := withToken(context.Background(), env.fluxd.Tokens["deployer"])
		b.ReportMetric(float64(env.first.Milliseconds()), "first-sync-ms")
		reqs := 0.0
		for b.Loop() {
			resp, err := env.client.Sync(ctx, &fluxdv1.SyncRequest{})
			checkBenchSync(b, resp, err, "unchanged", nil)
			reqs += syncRequests(b, env)
		}
		b.ReportMetric(reqs/float64(b.N), "kube-requests/op")
		if per := b.Elapsed() / time.Duration(b.N); fluxv2 > 0 && per > 0 {
			b.ReportMetric(float64(fluxv2)/float64(per), "x-fluxv2")
		}
	})
	b.Run("fluxd/one-drifted", func(b *testing.B) {
		env := syncBenchFluxd(b, "50")
		ctx := withToken(context.Background(), env.fluxd.Tokens["deployer"])
		kc := kubeClient(b)
		reqs := 0.0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			cm, err := kc.CoreV1().ConfigMaps(env.ns).Get(ctx, "obj-0042", metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			cm.Data["index"] = fmt.Sprintf("edited by hand %d", i)
			if _, err := kc.CoreV1().ConfigMaps(env.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
				b.Fatal(err)
			}
			// The edit reaches fluxd's informer a moment later.
			time.Sleep(time.Second)
			b.StartTimer()
			resp, err := env.client.Sync(ctx, &fluxdv1.SyncRequest{})
			checkBenchSync(b, resp, err, "unchanged", map[string]string{"ConfigMap/" + env.ns + "/obj-0042": "configured"})
			reqs += syncRequests(b, env)
		}
		b.ReportMetric(reqs/float64(b.N), "kube-requests/op")
		if cm, err := kc.CoreV1().ConfigMaps(env.ns).Get(ctx, "obj-0042", metav1.GetOptions{}); err != nil || cm.Data["index"] != "42" {
			b.Fatalf("obj-0042 was not corrected: %v %v", err, cm.Data)
		}
	})
	b.Run("fluxd/all-changed", func(b *testing.B) {
		env := syncBenchFluxd(b, "50")
		ctx := withToken(context.Background(), env.fluxd.Tokens["deployer"])
		reqs := 0.0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			env.marks++
			pushManifest(b, "Mark every object", syncBenchManifests(env.ns, fmt.Sprint(env.marks)))
			b.StartTimer()
			resp, err := env.client.Sync(ctx, &fluxdv1.SyncRequest{})
			checkBenchSync(b, resp, err, "configured", nil)
			reqs += syncRequests(b, env)
		}
		b.ReportMetric(reqs/float64(b.N), "kube-requests/op")
	})
}

// benchFluxV2 runs Flux v2's sync of the benchmark's objects: fluxcd/pkg/ssa's
// ApplyAllStaged as kustomize-controller calls it, at its default rate
// limit, and returns the time per sync.
func benchFluxV2(b *testing.B) time.Duration {
	ns := "syncbench-fluxv2"
	var docs strings.Builder
	files := syncBenchManifests(ns, "0")
	docs.WriteString(files[ns+"/namespace.yaml"])
	for i := 0; i < syncBenchObjects/100; i++ {
		docs.WriteString(files[fmt.Sprintf("%s/objects-%d.yaml", ns, i)])
	}
	objs, err := ssautils.ReadObjects(strings.NewReader(docs.String()))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = 50, 300 // kustomize-controller's --kube-api-qps and --kube-api-burst
	var requests atomic.Int64
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countRT{rt, &requests} })
	ctrllog.SetLogger(logr.Discard()) // controller-runtime complains without one
	c, err := client.New(rc, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rm := ssa.NewResourceManager(c, polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{}), ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	rm.SetConcurrency(4) // kustomize-controller's --concurrent-ssa
	ctx := context.Background()
	apply := func() *ssa.ChangeSet {
		us := make([]*unstructured.Unstructured, len(objs))
		for i, o := range objs {
			us[i] = o.DeepCopy()
		}
		cs, err := rm.ApplyAllStaged(ctx, us, ssa.DefaultApplyOptions())
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}
	apply() // creates them, untimed
	b.ResetTimer()
	before := requests.Load()
	for b.Loop() {
		cs := apply()
		for _, e := range cs.Entries {
			if e.Action != ssa.UnchangedAction {
				b.Fatalf("%s: %s, want unchanged", e.Subject, e.Action)
			}
		}
	}
	b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "kube-requests/op")
	return b.Elapsed() / time.Duration(b.N)
}

type countRT struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// syncRequests is the number of requests fluxd's last sync sent to the
// API server, from its metrics.
func syncRequests(b *testing.B, env *syncBenchEnv) float64 {
	b.Helper()
	resp, err := http.Get("http://" + env.metrics + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "fluxd_sync_kube_requests "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	b.Fatalf("fluxd exports no fluxd_sync_kube_requests")
	return 0
}

// checkBenchSync fails the benchmark unless every object had action want
// (the Namespace aside), or the one except names for it.
func checkBenchSync(b *testing.B, resp *fluxdv1.SyncResponse, err error, want string, except map[string]string) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, o := range resp.GetObjects() {
		if strings.HasPrefix(o.GetObject(), "Namespace/") {
			continue
		}
		w := want
		if x, ok := except[o.GetObject()]; ok {
			w = x
		}
		if o.GetAction() != w {
			b.Fatalf("%s was %s (%s), want %s", o.GetObject(), o.GetAction(), o.GetError(), w)
		}
		n++
	}
	if n != syncBenchObjects || len(resp.GetProblems()) > 0 || resp.GetError() != "" {
		b.Fatalf("synced %d objects, want %d; problems %v, error %q", n, syncBenchObjects, resp.GetProblems(), resp.GetError())
	}
}

// syncBenchFluxd starts, once per QPS, a fluxd syncing syncbench/ only
// when asked, and times its first sync.
func syncBenchFluxd(b *testing.B, qps string) *syncBenchEnv {
	b.Helper()
	syncBenchMu.Lock()
	defer syncBenchMu.Unlock()
	if env := syncBenchFds[qps]; env != nil {
		return env
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := "syncbench-" + qps
	pushManifest(b, "Add 1,000 objects", syncBenchManifests(ns, "0"))
	name := "fluxd-" + ns
	burst := qps
	if qps == "50" {
		burst = "100"
	}
	metrics, err := localstack.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	f, err := stack.StartNamedFluxd(ctx, name, filepath.Join(binDir, "fluxd"), instance, nil,
		"--metrics-listen="+metrics, "--git-path="+ns, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-"+ns,
		"--kube-api-qps="+qps, "--kube-api-burst="+burst, "--sync-timeout=10m",
		// No automator's fetch may start a sync between a push and the
		// timed Sync call.
		"--automation-long-wait=1h", "--automation-short-wait=1h")
	if err != nil {
		b.Fatalf("%v (log: %s)", err, stack.Log(name))
	}
	conn, err := grpc.NewClient("passthrough:///"+f.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	env := &syncBenchEnv{ns: ns, client: fluxdv1.NewFluxServiceClient(conn), fluxd: f, metrics: metrics}
	// The sync fluxd runs at start creates every object; a Sync call
	// waits for it. Its duration is the one fluxd logs.
	if _, err := env.client.Sync(withToken(ctx, f.Tokens["deployer"]), &fluxdv1.SyncRequest{}); err != nil {
		b.Fatalf("the first sync: %v (log: %s)", err, stack.Log(name))
	}
	env.first = firstSyncDuration(b, stack.Log(name))
	// The Deployment controller annotates each new Deployment (its
	// revision), which moves its generation: the next sync looks at those
	// once. That sync is setup, not what is measured.
	time.Sleep(2 * time.Second)
	if _, err := env.client.Sync(withToken(ctx, f.Tokens["deployer"]), &fluxdv1.SyncRequest{}); err != nil {
		b.Fatalf("the second sync: %v (log: %s)", err, stack.Log(name))
	}
	b.Logf("qps %s: the first sync created %d objects in %s", qps, syncBenchObjects, env.first)
	syncBenchFds[qps] = env
	return env
}

// firstSyncDuration is the duration fluxd logged for its first sync that
// created objects.
func firstSyncDuration(b *testing.B, log string) time.Duration {
	b.Helper()
	content, err := os.ReadFile(log)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(content), "\n") {
		if !strings.Contains(line, `msg="synced git to the cluster"`) || !strings.Contains(line, fmt.Sprintf("created=%d ", syncBenchObjects+1)) {
			continue
		}
		_, v, _ := strings.Cut(line, " duration=")
		v, _, _ = strings.Cut(v, " ")
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("fluxd's log line %q: %v", line, err)
		}
		return d
	}
	b.Fatalf("fluxd logged no sync creating %d objects: %s", syncBenchObjects+1, log)
	return 0
}
