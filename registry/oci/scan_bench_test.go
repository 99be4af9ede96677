package oci

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
)

// The scan benchmark: a real registry (go-containerregistry's Distribution
// server, in process) behind a handler that pages tag lists the way Docker
// Hub, GHCR and Quay do and counts every request. It compares fluxd's
// scans with what Flux v1 did: a manifest GET and a config GET for every
// tag, on every refresh.
//
//	go test -run '^$' -bench BenchmarkScan -benchtime 1x ./registry/oci
//	go test ... -scan.repos 100 -scan.tags 1000   (the second set-up)

var (
	scanRepos = flag.Int("scan.repos", 1, "repositories in the scan benchmark")
	scanTags  = flag.Int("scan.tags", 10000, "tags per repository in the scan benchmark")
)

type scanFixture struct {
	pager *pager
	srv   *httptest.Server
	repos []string
	next  int // the next tag number, per repository
}

// unthrottled lets the benchmark count requests rather than measure
// fluxd's own rate limit (100 per second per host by default).
var unthrottled = RateConfig{Rate: 1e6, Burst: 1000}

var (
	fixtureOnce sync.Once
	fixture     *scanFixture
)

// scanSetup pushes the repositories once per benchmark binary: every tag
// a distinct image (its own config, so its own digest), sharing a layer.
func scanSetup(b *testing.B) *scanFixture {
	fixtureOnce.Do(func() {
		p := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 1000}
		f := &scanFixture{pager: p, srv: httptest.NewServer(p)}
		host := strings.TrimPrefix(f.srv.URL, "http://")
		start := time.Now()
		for r := 0; r < *scanRepos; r++ {
			repo := fmt.Sprintf("%s/team/app-%d", host, r)
			f.repos = append(f.repos, repo)
			if err := pushTags(repo, 0, *scanTags); err != nil {
				b.Fatal(err)
			}
		}
		f.next = *scanTags
		b.Logf("pushed %d repositories x %d tags in %v", *scanRepos, *scanTags, time.Since(start).Round(time.Millisecond))
		fixture = f
	})
	if fixture == nil {
		b.Fatal("scan fixture setup failed")
	}
	return fixture
}

var baseLayer v1.Image

// pushTags pushes tags from..to-1 of repo, semver-named, each created a
// minute after the one before.
func pushTags(repo string, from, to int) error {
	if baseLayer == nil {
		img, err := random.Image(64, 1)
		if err != nil {
			return err
		}
		baseLayer = img
	}
	pusher, err := remote.NewPusher()
	if err != nil {
		return err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(32)
	for i := from; i < to; i++ {
		g.Go(func() error {
			img, err := mutate.CreatedAt(baseLayer, v1.Time{Time: t0.Add(time.Duration(i) * time.Minute)})
			if err != nil {
				return err
			}
			tag, err := name.NewTag(fmt.Sprintf("%s:%d.%d.%d", repo, i/10000, i/100%100, i%100))
			if err != nil {
				return err
			}
			return pusher.Push(ctx, tag, img)
		})
	}
	return g.Wait()
}

// report adds the registry's request counts per scan, and fluxd's heap.
func report(b *testing.B, p *pager, scans int) {
	n := float64(scans)
	b.ReportMetric(float64(p.lists.Load())/n, "lists/op")
	b.ReportMetric(float64(p.manifest.Load())/n, "manifestGETs/op")
	b.ReportMetric(float64(p.heads.Load())/n, "HEADs/op")
	b.ReportMetric(float64(p.blobs.Load())/n, "blobGETs/op")
	b.ReportMetric(float64(p.lists.Load()+p.manifest.Load()+p.heads.Load()+p.blobs.Load())/n, "requests/op")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMB")
}

func newCachedClient(b *testing.B) *Client {
	store, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "cache.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	c, err := New(Config{Cache: store, Concurrency: 16, Rate: unthrottled})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// Policies as containers carry them: a semver range (ordered by version)
// and a glob ordered by build time.
var (
	semverPolicy, _ = registry.ParseFilter("semver:>=0.0.0", "")
	timePolicy, _   = registry.ParseFilter("glob:*", registry.ByTime)
)

// scanAll finds the newest image of every repository under a policy, by
// the path a plan (and the automator) takes: release.Newest.
func scanAll(b *testing.B, c *Client, f *scanFixture, bySemver bool) {
	policy := timePolicy
	if bySemver {
		policy = semverPolicy
	}
	for _, repo := range f.repos {
		if _, n, err := release.Newest(context.Background(), c, repo, policy); err != nil || n == 0 {
			b.Fatalf("%s: %d images, %v", repo, n, err)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	f := scanSetup(b)
	p := f.pager
	requests := map[string]int64{}
	total := func(name string) {
		requests[name] = p.lists.Load() + p.manifest.Load() + p.heads.Load() + p.blobs.Load()
	}
	defer func() {
		base := requests["fluxv1-baseline"]
		fmt.Printf("\nregistry requests of %d repositories x %d tags, fluxd beside a model of Flux v1\n", *scanRepos, *scanTags)
		// Flux v1 fetched every tag cold, whatever the policy; warm, it
		// listed and fetched only new tags and tags whose refresh deadline
		// (1 h after the cold scan, doubling) had passed: within that
		// hour, exactly what fluxd sends. BenchmarkScanDay runs the day.
		v1 := map[string]int64{
			"a-cold-semver":    base,
			"b-cold-buildtime": base,
			"c-warm-rescan":    requests["c-warm-rescan"],
			"d-warm-10-new":    requests["d-warm-10-new"],
		}
		for _, name := range []string{"a-cold-semver", "b-cold-buildtime", "c-warm-rescan", "d-warm-10-new"} {
			if n := requests[name]; n > 0 {
				fmt.Printf("  %-18s fluxd %8d   Flux v1 %8d   %8.1fx fewer\n", name, n, v1[name], float64(v1[name])/float64(n))
			}
		}
		fmt.Println("  (c, d: Flux v1 as within the hour after its cold scan; later its refresh deadlines fall due, see BenchmarkScanDay)")
	}()

	// (a) A semver policy orders by tag alone: the list pages only, by
	// the policy-aware path plans take.
	b.Run("a-cold-semver", func(b *testing.B) {
		c, _ := New(Config{Rate: unthrottled})
		p.reset()
		for b.Loop() {
			scanAll(b, c, f, true)
		}
		total("a-cold-semver")
		report(b, p, b.N)
	})
	// (b) Ordering by build time, cold: a manifest GET per tag and a config
	// GET per distinct digest.
	b.Run("b-cold-buildtime", func(b *testing.B) {
		p.reset()
		for b.Loop() {
			b.StopTimer()
			c := newCachedClient(b)
			b.StartTimer()
			scanAll(b, c, f, false)
		}
		total("b-cold-buildtime")
		report(b, p, b.N)
	})
	warm := newCachedClient(b)
	scanAll(b, warm, f, false)
	// (c) Warm, nothing new: the list pages (and HEADs of mutable tags:
	// none here, every tag is a version).
	b.Run("c-warm-rescan", func(b *testing.B) {
		p.reset()
		for b.Loop() {
			scanAll(b, warm, f, false)
		}
		total("c-warm-rescan")
		report(b, p, b.N)
	})
	// (d) Warm, after 10 new tags in each repository: only they are fetched.
	b.Run("d-warm-10-new", func(b *testing.B) {
		p.reset()
		for b.Loop() {
			b.StopTimer()
			for _, repo := range f.repos {
				if err := pushTags(repo, f.next, f.next+10); err != nil {
					b.Fatal(err)
				}
			}
			f.next += 10
			p.reset()
			b.StartTimer()
			scanAll(b, warm, f, false)
		}
		total("d-warm-10-new")
		report(b, p, 1)
	})
	// The Flux v1 baseline, cold: a manifest GET and a config GET per tag
	// (one reused transport, so no ping per tag: kinder than v1 was). Its
	// steady state, with per-tag refresh deadlines, is BenchmarkScanDay.
	b.Run("fluxv1-baseline", func(b *testing.B) {
		puller, err := remote.NewPuller()
		if err != nil {
			b.Fatal(err)
		}
		p.reset()
		for b.Loop() {
			for _, repo := range f.repos {
				r, _ := name.NewRepository(repo)
				tags, err := puller.List(context.Background(), r)
				if err != nil {
					b.Fatal(err)
				}
				g, ctx := errgroup.WithContext(context.Background())
				g.SetLimit(16)
				for _, t := range tags {
					g.Go(func() error {
						desc, err := puller.Get(ctx, r.Tag(t))
						if err != nil {
							return err
						}
						img, err := desc.Image()
						if err != nil {
							return err
						}
						_, err = img.ConfigFile()
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		}
		total("fluxv1-baseline")
		report(b, p, b.N)
	})
}

// BenchmarkCacheMemory loads 100,000 cached tags from the database, as a
// restarted fluxd does, and reports the heap they take.
func BenchmarkCacheMemory(b *testing.B) {
	store, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "cache.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	const repos, perRepo = 100, 1000
	for r := 0; r < repos; r++ {
		tags, created := map[string]registry.TagState{}, map[string]registry.ImageMeta{}
		for i := 0; i < perRepo; i++ {
			d := fmt.Sprintf("sha256:%064x", r*perRepo+i)
			tags[fmt.Sprintf("1.%d.%d", i/100, i%100)] = registry.TagState{Digest: d}
			// A config digest and platform per image, as real scans store.
			created[d] = registry.ImageMeta{CreatedAt: time.Unix(int64(i), 0), ConfigDigest: fmt.Sprintf("sha256:%064x", 1<<40+r*perRepo+i), Platform: "linux/amd64"}
		}
		if err := store.SaveTags(ctx, fmt.Sprintf("reg.example/app-%d", r), tags, created, nil); err != nil {
			b.Fatal(err)
		}
	}
	var before runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		all := make([]any, 0, repos)
		for r := 0; r < repos; r++ {
			m, err := store.CachedTags(ctx, fmt.Sprintf("reg.example/app-%d", r))
			if err != nil || len(m) != perRepo {
				b.Fatalf("%d tags, %v", len(m), err)
			}
			all = append(all, m)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "MB-for-100k-tags")
		runtime.KeepAlive(all)
	}
}
