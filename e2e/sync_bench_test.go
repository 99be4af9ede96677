package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	ns     string // the namespace and git path
	client fluxdv1.FluxServiceClient
	fluxd  *localstack.Fluxd
	first  time.Duration // the first sync, creating (or adopting) every object
	marks  int
}

// BenchmarkSync1000Objects measures, on the local stack, a sync of 1,000
// objects of three kinds by a fluxd whose client may send 1,000 requests
// a second (qps1000) and by one at fluxd's default of 50 (qps50, where
// client-go's rate limit is what is measured): 'unchanged' is a sync that
// finds git and the cluster equal (the drift check every --sync-interval
// runs), 'all-changed' one after a commit that changed all 1,000. Each
// sync is one Sync call, the git fetch included; the commit's push is not
// timed. The first sync (every object created) is reported as
// first-sync-ms:
//
//	go test -run '^$' -bench BenchmarkSync1000Objects -benchtime 5x ./e2e/
func BenchmarkSync1000Objects(b *testing.B) {
	if testing.Short() {
		b.Skip("needs the local stack")
	}
	for _, qps := range []string{"1000", "50"} {
		b.Run("qps"+qps+"/unchanged", func(b *testing.B) {
			env := syncBenchFluxd(b, qps)
			ctx := withToken(context.Background(), env.fluxd.Tokens["deployer"])
			b.ReportMetric(float64(env.first.Milliseconds()), "first-sync-ms")
			for b.Loop() {
				resp, err := env.client.Sync(ctx, &fluxdv1.SyncRequest{})
				checkBenchSync(b, resp, err, "unchanged")
			}
		})
		b.Run("qps"+qps+"/all-changed", func(b *testing.B) {
			env := syncBenchFluxd(b, qps)
			ctx := withToken(context.Background(), env.fluxd.Tokens["deployer"])
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				env.marks++
				pushManifest(b, "Mark every object", syncBenchManifests(env.ns, fmt.Sprint(env.marks)))
				b.StartTimer()
				resp, err := env.client.Sync(ctx, &fluxdv1.SyncRequest{})
				checkBenchSync(b, resp, err, "configured")
			}
		})
	}
}

// checkBenchSync fails the benchmark unless every object had action want
// (the Namespace aside).
func checkBenchSync(b *testing.B, resp *fluxdv1.SyncResponse, err error, want string) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, o := range resp.GetObjects() {
		if strings.HasPrefix(o.GetObject(), "Namespace/") {
			continue
		}
		if o.GetAction() != want {
			b.Fatalf("%s was %s (%s), want %s", o.GetObject(), o.GetAction(), o.GetError(), want)
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
	f, err := stack.StartNamedFluxd(ctx, name, filepath.Join(binDir, "fluxd"), instance, nil,
		"--git-path="+ns, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-"+ns,
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
	env := &syncBenchEnv{ns: ns, client: fluxdv1.NewFluxServiceClient(conn), fluxd: f}
	// The sync fluxd runs at start creates every object; a Sync call
	// waits for it. Its duration is the one fluxd logs.
	if _, err := env.client.Sync(withToken(ctx, f.Tokens["deployer"]), &fluxdv1.SyncRequest{}); err != nil {
		b.Fatalf("the first sync: %v (log: %s)", err, stack.Log(name))
	}
	env.first = firstSyncDuration(b, stack.Log(name))
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
