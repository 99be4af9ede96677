package oci

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/release"
)

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
