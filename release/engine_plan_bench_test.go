package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"io/fs"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
)

const benchDoc = `# workload %[1]d
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: ns-%[2]d
  labels: {app: app-%[1]d}
spec:
  replicas: 2
  template:
    spec:
      initContainers:
        - name: init
          image: reg.example/init-%[3]d:1.0.0
      containers:
        - name: app
          image: "reg.example/app-%[3]d:1.0.0" # pinned by CI
          ports: [{containerPort: 8080}]
        - name: sidecar
          image: reg.example/sidecar:1.0.49
`

// writeBenchRepo writes 1,000 workloads in 300 files, one of them with 200
// documents, using 100 image repositories of 50 tags each.
func writeBenchRepo(tb testing.TB) (string, memImages) {
	tb.Helper()
	dir := tb.TempDir()
	n := 0
	big := &strings.Builder{}
	for i := 0; i < 200; i++ {
		if i > 0 {
			big.WriteString("---\n")
		}
		fmt.Fprintf(big, benchDoc, n, n%20, n%100)
		n++
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	// 299 more files hold the other 800 workloads.
	for f := 0; f < 299; f++ {
		sub := filepath.Join(dir, fmt.Sprintf("team-%d", f%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		b := &strings.Builder{}
		for k := 0; k < 3 && n < 1000; k++ {
			if k > 0 {
				b.WriteString("---\n")
			}
			fmt.Fprintf(b, benchDoc, n, n%20, n%100)
			n++
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.yaml", f)), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if n != 1000 {
		tb.Fatalf("wrote %d workloads", n)
	}
	images := memImages{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(repo string) {
		var imgs []registry.Image
		for t := 0; t < 50; t++ {
			imgs = append(imgs, registry.Image{Repository: repo, Tag: fmt.Sprintf("1.0.%d", t), CreatedAt: t0.Add(time.Duration(t) * time.Hour)})
		}
		registry.SortNewestFirst(imgs)
		images[repo] = imgs
	}
	for r := 0; r < 100; r++ {
		add(fmt.Sprintf("reg.example/app-%d", r))
		add(fmt.Sprintf("reg.example/init-%d", r))
	}
	add("reg.example/sidecar")
	return dir, images
}

// BenchmarkPlanAllLatest plans --all --update-all-images over 1,000
// workloads in 300 files with registry data already cached.
func BenchmarkPlanAllLatest(b *testing.B) {
	dir, images := writeBenchRepo(b)
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	spec := Spec{All: true, AllLatest: true, User: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		p, err := e.Plan(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Items) != 1000 || p.Updates() != 2000 {
			b.Fatalf("plan has %d items and %d updates; want 1000 and 2000", len(p.Items), p.Updates())
		}
	}
}

// BenchmarkPlanAllLatestRegistry is BenchmarkPlanAllLatest through the
// real registry client (registry/oci, a SQLite cache) against a real
// registry (go-containerregistry's, in process, paging and counting
// requests): release --all --update-all-images --dry-run over 1,000
// workloads using 201 repositories of 50 tags.
//
//   - cold: a new client and an empty cache (every tag list, and every
//     passing tag's manifest and config: no filter orders by build time);
//   - warm: the same client again, nothing pushed, with fluxd's default
//     list reuse (--registry-list-min 1m, doubling to --registry-list-max
//     5m): no request at all, which holds only while the lists are fresh,
//     i.e. within 1 to 5 minutes of the last read (the runs take seconds);
//   - warm-relist: warm, but every list read again (as before lists were
//     kept, or with --registry-list-min=0): one list request per
//     repository, which at fluxd's default 100 requests a second is 2 s.
//
// Requests are not rate limited here, so that the time is fluxd's own.
func BenchmarkPlanAllLatestRegistry(b *testing.B) {
	dir, images := writeBenchRepo(b)
	reg := regtest.New(1000)
	defer reg.Close()
	host := reg.Host()
	// The manifests name the registry's host.
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		bs, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, []byte(strings.ReplaceAll(string(bs), "reg.example", host)), 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	for repo := range images {
		if err := reg.PushVersions(context.Background(), strings.Replace(repo, "reg.example", host, 1), 10000, 10050, t0); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("pushed %d repositories x 50 tags in %v", len(images), time.Since(start).Round(time.Millisecond))
	spec := Spec{All: true, AllLatest: true, User: "bench"}
	newEngineAt := func(db string, listMin time.Duration, rate oci.RateConfig) *Engine {
		store, err := sqlite.Open(context.Background(), db)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { store.Close() })
		c, err := oci.New(oci.Config{Cache: store, Concurrency: 16, Rate: rate, ListMin: listMin})
		if err != nil {
			b.Fatal(err)
		}
		return NewEngine(dirRepo{dir}, c, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	newEngine := func(listMin time.Duration) *Engine {
		return newEngineAt(filepath.Join(b.TempDir(), "cache.db"), listMin, oci.RateConfig{Rate: 1e6, Burst: 1000})
	}
	plan := func(b *testing.B, e *Engine) {
		p, err := e.Plan(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		// Tags 1.0.0 to 1.0.49 (regtest.Version(10000) on): app and init
		// move to 1.0.49, the sidecar runs it.
		if len(p.Items) != 1000 || p.Updates() != 2000 {
			b.Fatalf("plan has %d items and %d updates; want 1000 and 2000", len(p.Items), p.Updates())
		}
	}
	report := func(b *testing.B) {
		n := float64(b.N)
		b.ReportMetric(float64(reg.Lists.Load())/n, "lists/op")
		b.ReportMetric(float64(reg.Requests())/n, "requests/op")
		b.ReportMetric(float64(reg.Other.Load())/n, "other/op") // the version checks (GET /v2/)
	}
	b.Run("cold", func(b *testing.B) {
		reg.Reset()
		for b.Loop() {
			b.StopTimer()
			e := newEngine(time.Minute)
			b.StartTimer()
			plan(b, e)
		}
		report(b)
	})
	// restart: a new client on the store a fluxd before it filled, as a
	// fluxd that starts again, under fluxd's default per-host rate (100
	// requests a second): every list is read once (metadata of version
	// tags comes from the store), and what else the client asks of the
	// registry on the way (its version checks) waits under the same
	// rate. This is the automator's first pass after a restart.
	b.Run("restart", func(b *testing.B) {
		reg.Reset()
		for b.Loop() {
			b.StopTimer()
			db := filepath.Join(b.TempDir(), "cache.db")
			plan(b, newEngineAt(db, time.Minute, oci.RateConfig{Rate: 1e6, Burst: 1000})) // the store's cache, as the fluxd before the restart left it
			e := newEngineAt(db, time.Minute, oci.RateConfig{})
			reg.Reset()
			b.StartTimer()
			plan(b, e)
		}
		report(b)
	})
	for _, bc := range []struct {
		name    string
		listMin time.Duration
	}{{"warm", time.Minute}, {"warm-relist", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEngine(bc.listMin)
			plan(b, e) // fills the cache
			reg.Reset()
			b.ReportAllocs()
			for b.Loop() {
				plan(b, e)
			}
			report(b)
		})
	}
}
