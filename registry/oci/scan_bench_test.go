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
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
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

// BenchmarkScanDay compares a day of registry traffic, cold start
// included, between a model of Flux v1's registry warmer and fluxd, on a
// real registry (in process, paging, counting), with a simulated clock:
//
//   - Flux v1's warmer lists every repository every minute
//     (askForNewImagesInterval in registry/cache/warming.go: when its
//     backlog is empty it asks for the images in use again each minute
//     and warms each repository once more); fluxd has a pass every 5
//     minutes (its automator and list-images calls);
//   - each repository gets -day.pushes new tags, spread over the day, each
//     followed by a notification (v1: the repository is warmed first;
//     fluxd: Refresh, as NotifyImage and the webhook do).
//
// The Flux v1 model (registry/cache/warming.go in fluxcd/flux v1): every
// pass (each minute) lists each repository; a tag not in the cache, or whose refresh
// deadline has passed, costs a manifest GET and a config GET; a new tag's
// deadline is 1 h, doubled (up to 7 days) each time a refresh finds the
// same digest, halved (down to 5 min) when it moved. Notified repositories
// go first: that changes when, not how many, requests are sent.
//
// fluxd goes through release.Newest, the path of plans, with a semver
// policy and with a build-time policy, a registry client with a SQLite
// cache and its default list reuse (1 min, doubling up to 5 min).
//
//	go test -run '^$' -bench BenchmarkScanDay -benchtime 1x ./registry/oci
var (
	dayRepos  = flag.Int("day.repos", 1, "repositories in BenchmarkScanDay")
	dayTags   = flag.Int("day.tags", 2000, "tags per repository in BenchmarkScanDay")
	dayPushes = flag.Int("day.pushes", 10, "tags pushed per repository over the simulated day")
)

const (
	dayStep        = 5 * time.Minute // fluxd's passes
	v1Step         = time.Minute     // Flux v1's askForNewImagesInterval
	v1FirstRefresh = time.Hour
	v1MinRefresh   = 5 * time.Minute
	v1MaxRefresh   = 7 * 24 * time.Hour
)

// v1Tag is what the Flux v1 model's cache holds for a tag.
type v1Tag struct {
	digest   string
	interval time.Duration
	deadline time.Time
}

// v1Warmer is the Flux v1 model.
type v1Warmer struct {
	puller *remote.Puller
	cache  map[string]map[string]*v1Tag // by repository, by tag
}

// warm lists a repository and refreshes the tags that are due.
func (w *v1Warmer) warm(ctx context.Context, repository string, now time.Time) error {
	repo, err := name.NewRepository(repository)
	if err != nil {
		return err
	}
	tags, err := w.puller.List(ctx, repo)
	if err != nil {
		return err
	}
	known := w.cache[repository]
	if known == nil {
		known = map[string]*v1Tag{}
		w.cache[repository] = known
	}
	type fetched struct {
		tag, digest string
	}
	var due []string
	for _, t := range tags {
		if e, ok := known[t]; !ok || !now.Before(e.deadline) {
			due = append(due, t)
		}
	}
	out := make([]fetched, len(due))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, t := range due {
		g.Go(func() error {
			desc, err := w.puller.Get(gctx, repo.Tag(t))
			if err != nil {
				return err
			}
			img, err := desc.Image()
			if err != nil {
				return err
			}
			if _, err := img.ConfigFile(); err != nil {
				return err
			}
			out[i] = fetched{t, desc.Digest.String()}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, f := range out {
		e, ok := known[f.tag]
		switch {
		case !ok:
			e = &v1Tag{interval: v1FirstRefresh}
			known[f.tag] = e
		case e.digest == f.digest:
			e.interval = min(e.interval*2, v1MaxRefresh)
		default:
			e.interval = max(e.interval/2, v1MinRefresh)
		}
		e.digest, e.deadline = f.digest, now.Add(e.interval)
	}
	return nil
}

func BenchmarkScanDay(b *testing.B) {
	reg := regtest.New(1000)
	defer reg.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var repos []string
	for r := range *dayRepos {
		repo := fmt.Sprintf("%s/team/day-%d", reg.Host(), r)
		if err := reg.PushVersions(ctx, repo, 0, *dayTags, t0); err != nil {
			b.Fatal(err)
		}
		repos = append(repos, repo)
	}
	pushEvery := 24 * time.Hour / time.Duration(max(*dayPushes, 1))
	type result struct {
		cold, day                      int64
		lists, manifests, heads, blobs int64 // of the day
	}
	results := map[string]result{}
	// simulate runs a day: pass is one 5-minute pass over every
	// repository, notify a repository's notification after a push.
	// next is the next tag to push: each run pushes tags of its own.
	next := *dayTags
	simulate := func(b *testing.B, every time.Duration, pass func(now time.Time) error, notify func(repo string, now time.Time) error) result {
		reg.Reset()
		now := t0
		if err := pass(now); err != nil {
			b.Fatal(err)
		}
		r := result{cold: reg.Requests()}
		reg.Reset()
		nextPush := t0.Add(pushEvery / 2) // -day.pushes pushes, spread over the day
		steps := int(24 * time.Hour / every)
		for step := 1; step < steps; step++ {
			now = t0.Add(time.Duration(step) * every)
			if *dayPushes > 0 && !now.Before(nextPush) {
				nextPush = nextPush.Add(pushEvery)
				for _, repo := range repos {
					if err := reg.PushVersions(ctx, repo, next, next+1, t0); err != nil {
						b.Fatal(err)
					}
					if err := notify(repo, now); err != nil {
						b.Fatal(err)
					}
				}
				next++
			}
			if err := pass(now); err != nil {
				b.Fatal(err)
			}
		}
		r.day = reg.Requests()
		r.lists, r.manifests, r.heads, r.blobs = reg.Lists.Load(), reg.Manifests.Load(), reg.Heads.Load(), reg.Blobs.Load()
		return r
	}
	b.Run("fluxv1", func(b *testing.B) {
		for b.Loop() {
			puller, err := remote.NewPuller()
			if err != nil {
				b.Fatal(err)
			}
			w := &v1Warmer{puller: puller, cache: map[string]map[string]*v1Tag{}}
			results["Flux v1 model"] = simulate(b, v1Step, func(now time.Time) error {
				for _, repo := range repos {
					if err := w.warm(ctx, repo, now); err != nil {
						return err
					}
				}
				return nil
			}, func(repo string, now time.Time) error {
				return w.warm(ctx, repo, now) // notified: warmed first
			})
		}
	})
	for _, pc := range []struct {
		name   string
		policy bool // semver
	}{{"fluxd semver policy", true}, {"fluxd build-time policy", false}} {
		b.Run(pc.name, func(b *testing.B) {
			for b.Loop() {
				store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cache.db"))
				if err != nil {
					b.Fatal(err)
				}
				var now time.Time
				c, err := New(Config{Cache: store, Concurrency: 16, Rate: unthrottled, ListMin: time.Minute, ListMax: 5 * time.Minute, Now: func() time.Time { return now }})
				if err != nil {
					b.Fatal(err)
				}
				policy := timePolicy
				if pc.policy {
					policy = semverPolicy
				}
				results[pc.name] = simulate(b, dayStep, func(t time.Time) error {
					now = t
					for _, repo := range repos {
						if _, _, err := release.Newest(ctx, c, repo, policy); err != nil {
							return err
						}
					}
					return nil
				}, func(repo string, t time.Time) error {
					now = t
					_, err := c.Refresh(ctx, repo)
					return err
				})
				store.Close()
			}
		})
	}
	b.Cleanup(func() {
		var names []string
		for n := range results {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Printf("\nregistry requests, %d repositories x %d tags, a day of passes (Flux v1 every minute, fluxd every 5), %d pushes per repository (each notified)\n", *dayRepos, *dayTags, *dayPushes)
		for _, n := range names {
			r := results[n]
			fmt.Printf("  %-24s cold %8d   rest of the day %8d (%d list pages, %d manifest GETs, %d HEADs, %d blob GETs)\n", n, r.cold, r.day, r.lists, r.manifests, r.heads, r.blobs)
		}
	})
}
