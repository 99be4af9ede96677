package daemon

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
)

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

// BenchmarkListImagesCold is the first list-images of a repository of
// -list.tags tags (10,000) that fluxd never read, at fluxd's default rate
// limit (100 requests a second): the time to the first answer and the
// registry requests made until then, under a semver policy and under
// build-time order, with the in-process registry's round trip (well under
// a millisecond) and with 50 ms added to each request (a registry across
// the internet). What the background refresh does after the answer is
// neither timed nor counted: the benchmark stops it.
func BenchmarkListImagesCold(b *testing.B) {
	// The registry is filled once per test binary (make bench runs each
	// benchmark 6 times) and left to the process's end.
	listOnce.Do(func() {
		listReg = regtest.New(1000)
		start := time.Now()
		listErr = listReg.PushVersions(context.Background(), listReg.Host()+"/team/big", 0, *listTags, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		b.Logf("pushed %d tags in %v", *listTags, time.Since(start).Round(time.Millisecond))
	})
	if listErr != nil {
		b.Fatal(listErr)
	}
	reg := listReg
	repo := reg.Host() + "/team/big"
	for _, bc := range []struct {
		name  string
		ann   map[string]string
		delay time.Duration
	}{
		{"semver", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, 0},
		{"buildtime", map[string]string{"fluxd.io/tag-all": "glob:*"}, 0},
		{"semver-50ms", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, 50 * time.Millisecond},
		{"buildtime-50ms", map[string]string{"fluxd.io/tag-all": "glob:*"}, 50 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var answer time.Duration
			var requests, read int64
			for b.Loop() {
				b.StopTimer()
				d, tr := pagedDaemon(b, repo, "0.1.0", bc.ann, oci.RateConfig{})
				tr.delay = bc.delay
				reg.Reset()
				b.StartTimer()
				t0 := time.Now()
				_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
				answer += time.Since(t0)
				b.StopTimer()
				requests += reg.Requests()
				if err != nil || cis[0].Err != nil || len(cis[0].Available) != *listTags {
					b.Fatalf("%v %v", err, cis)
				}
				read += int64(cis[0].Read)
				tr.closed.Store(true)
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(answer.Milliseconds())/n, "ms-to-first-answer")
			b.ReportMetric(float64(requests)/n, "requests-to-first-answer")
			b.ReportMetric(float64(read)/n, "times-read-at-answer")
		})
	}
}

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
