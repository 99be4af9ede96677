package automator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// The automator's first pass as make bench-scale sets it up, without the
// stack: N workloads in N/100 namespaces (a file each), all automated
// under semver:^1 and running their repository's newest tag, N/10
// repositories of 100 tags, the registry's answers already cached (a
// counting fake). The real release engine plans them.

// snapRepo is a clone at one revision whose files are a directory: a
// Snapshotter, as gogit.Repo is, so the engine reads each revision's
// files as they were at that revision.
type snapRepo struct {
	dir   string
	syncs atomic.Int64
}

func (r *snapRepo) Sync(context.Context) (string, error) { r.syncs.Add(1); return "rev-1", nil }
func (r *snapRepo) Dir() string                          { return r.dir }
func (r *snapRepo) Paths() []string                      { return []string{"."} }
func (r *snapRepo) Snapshot(context.Context, string) (string, func(), error) {
	return r.dir, func() {}, nil
}
func (r *snapRepo) Commit(context.Context, string, map[string][]byte, string, gitrepo.Signature) (string, error) {
	return "", errors.New("the benchmark's repo does not commit")
}
func (r *snapRepo) Push(context.Context, string) error {
	return errors.New("the benchmark's repo does not push")
}
func (r *snapRepo) FindCommit(context.Context, string, int) (string, error) {
	return "", nil
}

// countingImages is a registry cache in memory that counts the reads a
// plan makes of it.
type countingImages struct {
	tags                 map[string][]string
	tagReads, imageReads atomic.Int64
	existsReads          atomic.Int64
	created              time.Time
}

func (c *countingImages) Tags(_ context.Context, repo string) ([]string, error) {
	c.tagReads.Add(1)
	ts, ok := c.tags[repo]
	if !ok {
		return nil, fmt.Errorf("no repository %s", repo)
	}
	return append([]string(nil), ts...), nil
}

func (c *countingImages) ImagesMatching(_ context.Context, repo string, keep func(string) bool) ([]registry.Image, error) {
	c.imageReads.Add(1)
	var out []registry.Image
	for i, t := range c.tags[repo] {
		if keep == nil || keep(t) {
			out = append(out, registry.Image{Repository: repo, Tag: t, CreatedAt: c.created.Add(time.Duration(i) * time.Minute)})
		}
	}
	registry.SortNewestFirst(out)
	return out, nil
}

func (c *countingImages) Exists(context.Context, string) (bool, error) {
	c.existsReads.Add(1)
	return true, nil
}

func (c *countingImages) reads() int64 {
	return c.tagReads.Load() + c.imageReads.Load() + c.existsReads.Load()
}

// benchCluster runs every workload, at the image git names.
type benchCluster struct{ ws []platform.Workload }

func (c *benchCluster) Workloads(context.Context) ([]platform.Workload, error) { return c.ws, nil }
func (c *benchCluster) Apply(context.Context, platform.ID, []byte) (int64, error) {
	return 0, errors.New("the benchmark applies nothing")
}
func (c *benchCluster) Diagnose(context.Context, platform.ID) string { return "" }

type noRecorder struct{}

func (noRecorder) Record(context.Context, history.Event) (int64, error) { return 0, nil }

type noJobs struct{}

func (noJobs) Enqueue(context.Context, string, release.Spec, string) (jobs.JobUpdate, error) {
	return jobs.JobUpdate{}, errors.New("the benchmark releases nothing")
}
func (noJobs) Get(context.Context, string, string) (jobs.JobUpdate, error) {
	return jobs.JobUpdate{}, errors.New("no such job")
}

// scaleSetUp writes n workloads as make bench-scale does and returns the
// engine over them.
func scaleSetUp(b *testing.B, n int) (*release.Engine, *countingImages, *snapRepo) {
	b.Helper()
	dir := b.TempDir()
	repos, tags := max(1, n/10), 100
	tag := func(i int) string { return fmt.Sprintf("1.0.%d", i) }
	repoName := func(r int) string { return fmt.Sprintf("reg.example/scale/app-%04d", r) }
	cl := &benchCluster{}
	for ns := range max(1, n/100) {
		var m strings.Builder
		nsName := fmt.Sprintf("scale-ns-%03d", ns)
		fmt.Fprintf(&m, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", nsName)
		for j := range min(100, n) {
			i := ns*100 + j
			image := repoName(i%repos) + ":" + tag(tags-1)
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
          image: %[3]s
`, i, nsName, image)
			cl.ws = append(cl.ws, platform.Workload{ID: platform.ID{Namespace: nsName, Kind: "deployment", Name: fmt.Sprintf("app-%d", i)},
				Containers: []platform.Container{{Name: "app", Image: image}}, Status: "ready"})
		}
		if err := os.WriteFile(filepath.Join(dir, nsName+".yaml"), []byte(m.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	images := &countingImages{tags: map[string][]string{}, created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for r := range repos {
		for t := range tags {
			images.tags[repoName(r)] = append(images.tags[repoName(r)], tag(t))
		}
	}
	repo := &snapRepo{dir: dir}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return release.NewEngine(repo, images, cl, noRecorder{}, log), images, repo
}

// peakHeap samples the Go heap in use (live objects and garbage not yet
// swept) every millisecond until stop is closed, and sends its peak.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// BenchmarkFirstPass is the automator's first pass (every automated
// service checked, one plan) over a fresh automator and a fresh engine at
// 1,000 and 10,000 workloads, registry answers cached. Reported beside
// time and allocations: registry reads per pass (reads/op), git fetches
// (syncs/op), and the peak of the Go heap during the pass above what the
// set-up left (peak-heap-MB), sampled every millisecond.
func BenchmarkFirstPass(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var reads, syncs int64
			var peak uint64
			ops := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				engine, images, repo := scaleSetUp(b, n)
				runtime.GC()
				s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
				metrics.Read(s)
				base := s[0].Value.Uint64()
				stop := make(chan struct{})
				peaks := peakHeap(stop)
				clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
				a := New(Config{}, engine, noJobs{}, clk, log)
				b.StartTimer()
				a.Step(ctx)
				b.StopTimer()
				close(stop)
				p := <-peaks
				if p > base {
					peak = max(peak, p-base)
				}
				ops++
				reads += images.reads()
				syncs += repo.syncs.Load()
				st := a.Statuses()
				if len(st) != n {
					b.Fatalf("%d services tracked, want %d", len(st), n)
				}
				for id, s := range st {
					if s.State != UpToDate || s.Decision != "nothing newer" {
						b.Fatalf("%s: %s, %q; want every service up to date with nothing newer", id, s.State, s.Decision)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(reads)/float64(ops), "reads/op")
			b.ReportMetric(float64(syncs)/float64(ops), "syncs/op")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// BenchmarkDryRunPlan is release --all --update-all-images --dry-run
// (release.Engine.Plan) at 1,000 and 10,000 workloads set up as for
// BenchmarkFirstPass, after the daemon's view read the same revision
// (Engine.Manifests), as it has when a caller asks: every plan reads the
// revision (a fetch that finds it unchanged) and the cluster's workloads.
func BenchmarkDryRunPlan(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			engine, images, _ := scaleSetUp(b, n)
			if _, _, err := engine.Manifests(ctx); err != nil {
				b.Fatal(err)
			}
			before := images.reads()
			ops := 0
			b.ReportAllocs()
			for b.Loop() {
				p, err := engine.Plan(ctx, release.Spec{All: true, AllLatest: true, User: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Items) != n || p.Updates() != 0 {
					b.Fatalf("%d items, %d updates; want %d items up to date", len(p.Items), p.Updates(), n)
				}
				ops++
			}
			b.ReportMetric(float64(images.reads()-before)/float64(ops), "reads/op")
		})
	}
}
