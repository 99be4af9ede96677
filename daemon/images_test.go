package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"slices"
	"strings"

	"flag"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// slowRegistry refreshes only when the test says so (or fails), and has a
// cache of what an earlier refresh read.
type slowRegistry struct {
	release chan struct{}
	err     error
	cached  []registry.Image
	status  registry.RefreshStatus
}

func (r *slowRegistry) Images(ctx context.Context, repo string) ([]registry.Image, error) {
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(r.cached, registry.Image{Repository: repo, Tag: "new"}), nil
}

func (r *slowRegistry) Cached(context.Context, string) ([]registry.Image, error) {
	return r.cached, nil
}
func (r *slowRegistry) Status(string) registry.RefreshStatus { return r.status }

func TestListImagesAnswersFromTheCacheWhileARefreshRuns(t *testing.T) {
	app := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	cluster := &stubCluster{workloads: []platform.Workload{{ID: app, Containers: []platform.Container{{Name: "app", Image: "reg.example/app:1"}}}}}
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	reg := &slowRegistry{release: make(chan struct{}), status: registry.RefreshStatus{RefreshedAt: at},
		cached: []registry.Image{{Repository: "reg.example/app", Tag: "1", CreatedAt: at}}}
	d := New(Config{ListWait: 50 * time.Millisecond}, Deps{Cluster: cluster, Releaser: stubReleaser{}, Images: reg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	// The refresh hangs: the answer comes from the cache, in time, saying so.
	_, cis, err := d.ListImages(ctx, auth.Identity{}, "app")
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	if ci := cis[0]; !ci.Refresh.Refreshing || len(ci.Available) != 1 || ci.Available[0].Tag != "1" || ci.Err != nil {
		t.Errorf("while refreshing: %+v", ci)
	}
	// The refresh goes on in the background, shared: a second call joins
	// it, and once it ends the fresh list is answered.
	close(reg.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
		if !cis[0].Refresh.Refreshing || time.Now().After(deadline) {
			break
		}
	}
	if ci := cis[0]; ci.Refresh.Refreshing || len(ci.Available) != 2 {
		t.Errorf("after the refresh: %+v", ci)
	}

	// A failing registry: the cached images, with the error.
	reg.err = errors.New("registry reg.example: 503 Service Unavailable")
	_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
	if ci := cis[0]; ci.Refresh.LastError == "" || len(ci.Available) != 1 || ci.Err != nil {
		t.Errorf("after a failed refresh: %+v", ci)
	}
	// Nothing cached and failing: the error.
	reg.cached = nil
	_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
	if ci := cis[0]; ci.Err == nil {
		t.Errorf("nothing cached, refresh failed: %+v", ci)
	}
}

// cosign's own tags in a repository (a signature, an attestation, an SBOM
// and the referrers fallback index, all pushed after the releases, so the
// newest by build time) are never candidates in list-images, not even
// under glob:*: neither passing nor best, on either listing.
func TestListImagesNeverOffersCosignArtifacts(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repo, 0, 3, t0); err != nil {
		t.Fatal(err)
	}
	signed, err := name.NewTag(repo + ":" + regtest.Version(2))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(signed)
	if err != nil {
		t.Fatal(err)
	}
	fallback := strings.Replace(desc.Digest.String(), ":", "-", 1)
	artifacts := []string{fallback + ".sig", fallback + ".att", fallback + ".sbom", fallback}
	for i, tag := range artifacts {
		img, err := random.Image(32, 1)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.CreatedAt(img, v1.Time{Time: t0.Add(time.Hour + time.Duration(i)*time.Minute)}); err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}

	d, _ := pagedDaemon(t, repo, regtest.Version(0), map[string]string{"fluxd.io/tag-all": "glob:*"}, oci.RateConfig{})
	_, cis, err := d.ListImages(ctx, auth.Identity{}, "app")
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	ci := cis[0]
	if ci.Err != nil {
		t.Fatal(ci.Err)
	}
	if ci.Best != regtest.Version(2) {
		t.Errorf("best is %q, want %s: the newest release, not a cosign artifact", ci.Best, regtest.Version(2))
	}
	for _, tag := range ci.Passing {
		if registry.CosignArtifact(tag) {
			t.Errorf("glob:* passes cosign's %s in list-images: %v", tag, ci.Passing)
		}
	}
	if len(ci.Passing) != 3 {
		t.Errorf("passing %v, want the 3 releases", ci.Passing)
	}

	_, cis, err = d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 10})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	_, cis, _ = d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 10})
	if ci = cis[0]; ci.Best != "" && ci.Best != regtest.Version(2) {
		t.Errorf("paged: best is %q, want %s", ci.Best, regtest.Version(2))
	}
	if slices.ContainsFunc(ci.Passing, registry.CosignArtifact) {
		t.Errorf("paged: glob:* passes cosign's artifacts: %v", ci.Passing)
	}
}

// list-images with no limit (the proto default: all) of a cold repository,
// called three times: the page is not read before each answer on top of
// the background refresh, which the calls share. Reading every image once
// costs one manifest GET each.
func TestUnlimitedColdListImagesReadsEachImageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 400 images")
	}
	const n = 400
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, n, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, _ := pagedDaemon(t, repo, "0.1.0", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, oci.RateConfig{Rate: 200, Burst: 20})
	reg.Reset()
	for i := range 3 {
		_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(cis) != 1 || cis[0].Err != nil || len(cis[0].Available) != n {
			t.Fatalf("call %d: %+v", i, cis)
		}
	}
	// Wait for the background work: joining an in-flight refresh waits
	// for it; one that ended answers at once.
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := cis[0].Read; got != n {
		t.Errorf("after the refresh %d of %d images are read", got, n)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	if got := reg.Manifests.Load(); got > n+n/10 {
		t.Errorf("4 unlimited list-images of %d tags cost %d manifest GETs, want about %d (each image read once)", n, got, n)
	}
	t.Logf("manifest GETs %d, blob GETs %d, lists %d", reg.Manifests.Load(), reg.Blobs.Load(), reg.Lists.Load())
}

// A small repository under semver order: list-images reads the page and
// the running image, not every tag (before, a refresh of all 40).
func TestSemverListImagesOfASmallRepositoryReadsThePageOnly(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, 40, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, _ := pagedDaemon(t, repo, "0.0.1", map[string]string{"fluxd.io/tag-all": "semver:>=0.0.1"}, oci.RateConfig{})
	reg.Reset()
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
	if err != nil || len(cis) != 1 || cis[0].Err != nil || len(cis[0].Available) != 40 {
		t.Fatalf("%+v %v", cis, err)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	if got := reg.Manifests.Load(); got > 4 {
		t.Errorf("a page of 3 under semver read %d manifests of 40 tags, want the page's and the running image's (4)", got)
	}
	for _, img := range cis[0].Available[:3] {
		if img.Digest == "" {
			t.Errorf("row %s of the page not read", img.Tag)
		}
	}
}

// policyReleaser is a releaser whose git holds one workload with the
// given annotations.
type policyReleaser struct {
	stubReleaser
	def *gitrepo.Definition
}

func (r policyReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{r.def.ID: r.def}}, nil
}

// closable fails every request once closed, so that a benchmark can end
// the background refresh it started.
type closable struct {
	next   http.RoundTripper
	closed atomic.Bool
	// delay is added to every request: a registry's round trip (set
	// before the first request).
	delay time.Duration
}

func (c *closable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.closed.Load() {
		return &http.Response{StatusCode: http.StatusNotFound, Body: http.NoBody, Request: r, Header: http.Header{}}, nil
	}
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return c.next.RoundTrip(r)
}

// pagedDaemon is a Daemon over a real registry client (rate limit and
// all, by default) with a SQLite cache, serving one service that runs
// repo:running under the annotations.
func pagedDaemon(tb testing.TB, repo, running string, ann map[string]string, rate oci.RateConfig) (*Daemon, *closable) {
	tb.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "cache.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	tr := &closable{next: http.DefaultTransport}
	c, err := oci.New(oci.Config{Cache: store, Rate: rate, Transport: tr, ListMin: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	id := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	ctr := platform.Container{Name: "app", Image: repo + ":" + running}
	def := &gitrepo.Definition{ID: id, File: "app.yaml", Containers: []gitrepo.Container{{Name: "app", Image: ctr.Image}}, Annotations: ann}
	d := New(Config{}, Deps{Cluster: &stubCluster{workloads: []platform.Workload{{ID: id, Containers: []platform.Container{ctr}}}},
		Releaser: policyReleaser{def: def}, Images: c}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return d, tr
}

// A repository never scanned, under a semver policy: the first page comes
// from the tag list, best first, its images read before the answer; the
// rest is read in the background, and a later listing has it all.
func TestListImagesPageOfAColdRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 300 images")
	}
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, 300, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, _ := pagedDaemon(t, repo, "0.1.0", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, oci.RateConfig{})
	ctx := context.Background()
	_, cis, err := d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 3})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	ci := cis[0]
	if ci.Err != nil || len(ci.Available) != 300 {
		t.Fatalf("want 300 images, got %d: %v", len(ci.Available), ci.Err)
	}
	for i, want := range []string{"0.2.99", "0.2.98", "0.2.97"} {
		img := ci.Available[i]
		if img.Tag != want || img.Digest == "" || !img.Dated() {
			t.Errorf("row %d: want %s read, got %+v", i, want, img)
		}
	}
	if ci.Best != "0.2.99" || len(ci.Passing) != 200 || ci.Passing[0] != "0.2.99" {
		t.Errorf("best %q, %d passing (first %v)", ci.Best, len(ci.Passing), ci.Passing[:1])
	}
	// The running image is read too; filtered-out tags follow the passing.
	if img := findImage(ci.Available, "0.1.0"); img.Digest == "" {
		t.Errorf("the running image was not read: %+v", img)
	}
	if ci.Available[200].Tag >= "0.1.0" {
		t.Errorf("row 200 is %s, want a tag the filter leaves out", ci.Available[200].Tag)
	}

	// Under semver order nothing else is read: not every tag's manifest
	// and config for a page of 3. A later listing of the same page is
	// answered from the cache, not refreshing.
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	if got := reg.Manifests.Load(); got > 10 {
		t.Errorf("a page of 3 under semver read %d manifests, want the page's and the running image's (4)", got)
	}
	_, cis, _ = d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 3})
	if ci = cis[0]; ci.Refresh.Refreshing {
		t.Errorf("the page is read, yet list-images says refreshing")
	}
}

// Under build-time order, a cold repository shows what is known and how
// far the reading is; the best is only named once every passing tag is.
func TestListImagesByBuildTimeSaysWhatIsStillRead(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 200 images")
	}
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, 200, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	// 20 requests a second: the background refresh takes 20 s.
	d, tr := pagedDaemon(t, repo, "0.0.1", map[string]string{"fluxd.io/tag-all": "glob:0.*"}, oci.RateConfig{Rate: 20, Burst: 10})
	defer tr.closed.Store(true)
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	ci := cis[0]
	if ci.Read >= 200 {
		t.Skipf("the machine read all 200 images before answering; nothing partial to check")
	}
	if !ci.Refresh.Refreshing || ci.Best != "" {
		t.Errorf("refreshing %v, best %q: want refreshing and no best yet", ci.Refresh.Refreshing, ci.Best)
	}
	if !hasWarning(ci.Warnings, "still being read") {
		t.Errorf("no warning that the order is partial: %q", ci.Warnings)
	}
	unread := 0
	for _, img := range ci.Available {
		if img.Digest == "" {
			unread++
		}
	}
	if unread != 200-ci.Read {
		t.Errorf("%d rows unread, but %d of 200 read", unread, ci.Read)
	}
}

func findImage(imgs []registry.Image, tag string) registry.Image {
	for _, img := range imgs {
		if img.Tag == tag {
			return img
		}
	}
	return registry.Image{}
}

func hasWarning(ws []string, s string) bool {
	for _, w := range ws {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

var (
	listTags = flag.Int("list.tags", 10000, "tags of the repository in BenchmarkListImagesCold")
	listOnce sync.Once
	listReg  *regtest.Registry
	listErr  error
)

// pathCounter counts the requests that reach the registry, by kind.
type pathCounter struct {
	next      http.RoundTripper
	manifests atomic.Int64
	blobs     atomic.Int64
	lists     atomic.Int64
}

func (p *pathCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.Contains(r.URL.Path, "/manifests/"):
		p.manifests.Add(1)
	case strings.Contains(r.URL.Path, "/blobs/"):
		p.blobs.Add(1)
	case strings.HasSuffix(r.URL.Path, "/tags/list"):
		p.lists.Add(1)
	}
	return p.next.RoundTrip(r)
}

// A notification for a repository its only user orders by version reads
// the tag list and nothing else, as list-images and plans would: the new
// tags' manifests and configs are read when something shows or plans
// them, not because of the push.
func TestNotifyUnderVersionOrderReadsOnlyTheTagList(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes images")
	}
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	if err := reg.PushVersions(ctx, repo, 0, 20, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, tr := pagedDaemon(t, repo, "0.0.1", map[string]string{"fluxd.io/tag-all": "semver:>=0.0.0"}, oci.RateConfig{})
	count := &pathCounter{next: tr.next}
	tr.next = count
	// The cache knows the repository, every tag read.
	if _, err := d.deps.Images.Images(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := reg.PushVersions(ctx, repo, 20, 30, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	m, b, l := count.manifests.Load(), count.blobs.Load(), count.lists.Load()
	if _, n, err := d.Notify(ctx, auth.Identity{}, repo+":0.0.25"); err != nil || n != 30 {
		t.Fatalf("notify: %d tags, %v; want 30", n, err)
	}
	if dm, db, dl := count.manifests.Load()-m, count.blobs.Load()-b, count.lists.Load()-l; dm != 0 || db != 0 || dl < 1 {
		t.Errorf("the notification read %d manifests, %d blobs and %d tag lists; want the tag list alone", dm, db, dl)
	}
}
