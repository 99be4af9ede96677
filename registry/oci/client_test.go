package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// pager pages tag lists the way Docker Hub, GHCR and Quay do (n, last and
// a Link header), in front of the in-process registry, which sends no
// Link header, and counts requests by kind.
type pager struct {
	next     http.Handler
	pageSize int
	lists    atomic.Int64
	manifest atomic.Int64
	heads    atomic.Int64
	blobs    atomic.Int64
	other    atomic.Int64
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/tags/list"):
		p.lists.Add(1)
		q := r.URL.Query()
		// Ask for one more than a page, to know whether a next page
		// exists (the in-process registry restarts from the first tag
		// when last is the final one).
		q.Set("n", fmt.Sprint(p.pageSize+1))
		r.URL.RawQuery = q.Encode()
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r)
		var body struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(body.Tags) > p.pageSize {
			body.Tags = body.Tags[:p.pageSize]
			w.Header().Set("Link", fmt.Sprintf(`<%s?n=%d&last=%s>; rel="next"`, r.URL.Path, p.pageSize, body.Tags[len(body.Tags)-1]))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
		return
	case strings.Contains(r.URL.Path, "/manifests/") && r.Method == http.MethodHead:
		p.heads.Add(1)
	case strings.Contains(r.URL.Path, "/manifests/"):
		p.manifest.Add(1)
	case strings.Contains(r.URL.Path, "/blobs/"):
		p.blobs.Add(1)
	default:
		p.other.Add(1)
	}
	p.next.ServeHTTP(w, r)
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

func imageAt(t *testing.T, created time.Time, labels map[string]string) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImagesFollowsPagesAndFetchesEachConfigOnce(t *testing.T) {
	p := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 2}
	srv := httptest.NewServer(p)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/app"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	push(t, repo+":1.0.0", imageAt(t, t0, nil))
	push(t, repo+":1.1.0", imageAt(t, t0.Add(24*time.Hour), nil))
	same := imageAt(t, t0.Add(48*time.Hour), nil)
	push(t, repo+":1.2.0", same)
	push(t, repo+":stable", same) // same digest: one config fetch for both
	// The label wins over the config's created field.
	push(t, repo+":labelled", imageAt(t, t0, map[string]string{CreatedLabel: t0.Add(72 * time.Hour).Format(time.RFC3339)}))
	// A multi-platform index: the linux/amd64 image's time counts.
	amd := imageAt(t, t0.Add(96*time.Hour), nil)
	arm := imageAt(t, t0.Add(120*time.Hour), nil)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	idxTag, _ := name.NewTag(repo + ":multi")
	if err := remote.WriteIndex(idxTag, idx); err != nil {
		t.Fatal(err)
	}
	p.lists.Store(0)
	p.manifest.Store(0)
	p.blobs.Store(0)
	p.other.Store(0)

	c, err := New(Config{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := c.Images(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range imgs {
		got = append(got, fmt.Sprintf("%s@%s", i.Tag, i.CreatedAt.Format("01-02")))
	}
	want := "multi@01-05 labelled@01-04 stable@01-03 1.2.0@01-03 1.1.0@01-02 1.0.0@01-01"
	if strings.Join(got, " ") != want {
		t.Errorf("images = %v\nwant     %s", got, want)
	}
	// 6 tags in pages of 2: 4 list requests (the last page is empty).
	// One manifest GET per tag, plus one for the index's amd64 image; one
	// config blob per distinct image (5).
	t.Logf("requests: lists %d, manifests %d, blobs %d, other %d", p.lists.Load(), p.manifest.Load(), p.blobs.Load(), p.other.Load())
	if p.lists.Load() < 3 {
		t.Errorf("%d tag-list requests: pagination was not followed", p.lists.Load())
	}
	if p.manifest.Load() != 7 || p.blobs.Load() != 5 {
		t.Errorf("manifests %d (want 7), blobs %d (want 5)", p.manifest.Load(), p.blobs.Load())
	}

	// A second scan knows every digest: manifests only, no config blobs.
	p.manifest.Store(0)
	p.blobs.Store(0)
	if _, err := c.Images(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if p.manifest.Load() != 6 || p.blobs.Load() != 0 {
		t.Errorf("second scan: manifests %d (want 6), blobs %d (want 0)", p.manifest.Load(), p.blobs.Load())
	}
}

func TestRegistryErrorsNameTheRegistry(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ggcrregistry.New())
	host := strings.TrimPrefix(srv.URL, "http://")
	_, err = c.Images(context.Background(), host+"/missing")
	if fluxerr.KindOf(err) != fluxerr.Missing || !strings.Contains(err.Error(), host) {
		t.Errorf("missing repository: %v (kind %v)", err, fluxerr.KindOf(err))
	}
	srv.Close()
	_, err = c.Images(context.Background(), host+"/app")
	if fluxerr.KindOf(err) != fluxerr.Unavailable || !strings.Contains(err.Error(), "cannot reach registry "+host) {
		t.Errorf("unreachable registry: %v", err)
	}
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer deny.Close()
	_, err = c.Images(context.Background(), strings.TrimPrefix(deny.URL, "http://")+"/app")
	if !strings.Contains(err.Error(), "refused access") {
		t.Errorf("401: %v", err)
	}
}

// privateRegistry serves an in-process registry that wants basic auth as
// puller:pw, with one image, private:1.0, and returns its host.
func privateRegistry(t *testing.T) string {
	t.Helper()
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tag, _ := name.NewTag(host + "/private:1.0")
	if err := remote.Write(tag, imageAt(t, time.Now(), nil), remote.WithAuth(&authn.Basic{Username: "puller", Password: "pw"})); err != nil {
		t.Fatal(err)
	}
	return host
}

func TestPullSecretCredentials(t *testing.T) {
	host := privateRegistry(t)
	reads := 0
	secret := []byte(`{"auths":{"` + host + `":{"username":"puller","password":"pw"}}}`)
	kc := NewSecretKeychain(func(context.Context) ([]Credentials, error) {
		reads++
		return []Credentials{
			{Source: "image pull secret default/broken", DockerConfig: []byte("not json"), Images: []string{host + "/private:1.0"}},
			{Source: "image pull secret default/private", DockerConfig: secret, Images: []string{host + "/private:1.0"}},
		}, nil
	}, time.Hour)

	anon, _ := New(Config{})
	if _, err := anon.Images(context.Background(), host+"/private"); err == nil || !strings.Contains(err.Error(), "fluxd has no credentials") {
		t.Fatalf("without the secret: %v", err)
	}
	c, err := New(Config{Keychains: []authn.Keychain{kc}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		imgs, err := c.Images(context.Background(), host+"/private")
		if err != nil || len(imgs) != 1 || imgs[0].Tag != "1.0" {
			t.Fatalf("with the pull secret: %v, %v", imgs, err)
		}
	}
	if reads != 1 {
		t.Errorf("the secrets were read %d times within the TTL, want 1", reads)
	}
}

func (p *pager) reset() {
	p.lists.Store(0)
	p.manifest.Store(0)
	p.heads.Store(0)
	p.blobs.Store(0)
}

func (p *pager) counts() string {
	return fmt.Sprintf("lists %d, manifest GETs %d, HEADs %d, blobs %d", p.lists.Load(), p.manifest.Load(), p.heads.Load(), p.blobs.Load())
}

func TestIncrementalRefreshWithAPersistentCache(t *testing.T) {
	p := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 100}
	srv := httptest.NewServer(p)
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0", "a1b2c3d"} {
		push(t, repo+":"+tag, imageAt(t, t0.Add(time.Duration(i)*time.Hour), nil))
	}
	push(t, repo+":latest", imageAt(t, t0.Add(10*time.Hour), nil))
	dbPath := filepath.Join(t.TempDir(), "cache.db")
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func() *Client {
		store, err := sqlite.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		c, err := New(Config{Cache: store, Now: clock, RecheckMin: time.Minute, RecheckMax: 4 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	scan := func(c *Client) []string {
		t.Helper()
		imgs, err := c.Images(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		var tags []string
		for _, i := range imgs {
			tags = append(tags, i.Tag)
		}
		return tags
	}
	c := open()
	p.reset()
	if got := fmt.Sprint(scan(c)); got != "[latest a1b2c3d 1.2.0 1.1.0 1.0.0]" {
		t.Errorf("cold scan: %s", got)
	}
	if p.manifest.Load() != 5 || p.blobs.Load() != 5 || p.heads.Load() != 0 {
		t.Errorf("cold scan: %s; want 5 manifest GETs and 5 blobs", p.counts())
	}

	// Warm, with nothing new, before the mutable tag's re-check is due:
	// the list alone.
	p.reset()
	scan(c)
	if p.manifest.Load() != 0 || p.blobs.Load() != 0 || p.heads.Load() != 0 || p.lists.Load() != 1 {
		t.Errorf("warm rescan: %s; want the list only", p.counts())
	}
	// Once due (1m after it was fetched): a HEAD for the one mutable tag.
	// Its digest is the same, so the next check waits twice as long.
	heads := func(advance time.Duration, c *Client) int64 {
		t.Helper()
		now = now.Add(advance)
		p.reset()
		scan(c)
		if p.manifest.Load() != 0 || p.blobs.Load() != 0 {
			t.Errorf("rescan with nothing new fetched: %s", p.counts())
		}
		return p.heads.Load()
	}
	for i, step := range []struct {
		advance time.Duration
		want    int64
	}{{time.Minute, 1}, {time.Minute, 0}, {time.Minute, 1}, {3 * time.Minute, 0}, {time.Minute, 1}, {4 * time.Minute, 1}} {
		if got := heads(step.advance, c); got != step.want {
			t.Errorf("step %d (+%v): %d HEADs of latest, want %d (interval 1m doubling to 4m)", i, step.advance, got, step.want)
		}
	}

	// A restarted fluxd on the same database does not refetch either, and
	// keeps the re-check schedule.
	c2 := open()
	if got := heads(time.Minute, c2); got != 0 {
		t.Errorf("after a restart: %d HEADs; want none before the re-check is due", got)
	}
	// A notification (Refresh) checks the mutable tag at once.
	p.reset()
	if _, err := c2.Refresh(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if p.heads.Load() != 1 || p.manifest.Load() != 0 {
		t.Errorf("Refresh: %s; want 1 HEAD, whatever the interval", p.counts())
	}
	now = now.Add(time.Hour)

	// New tags and a moved mutable tag: only they are fetched.
	push(t, repo+":1.3.0", imageAt(t, t0.Add(20*time.Hour), nil))
	push(t, repo+":latest", imageAt(t, t0.Add(21*time.Hour), nil))
	p.reset()
	if got := scan(c2); got[0] != "latest" || got[1] != "1.3.0" {
		t.Errorf("after pushes: %v", got)
	}
	if p.manifest.Load() != 2 || p.blobs.Load() != 2 || p.heads.Load() != 1 {
		t.Errorf("after 1 new tag and 1 moved tag: %s; want 2 GETs, 2 blobs, 1 HEAD", p.counts())
	}

	// A tag deleted from the registry leaves the cache.
	tag, _ := name.NewTag(repo + ":1.0.0")
	if err := remote.Delete(tag); err != nil {
		t.Skipf("the in-process registry cannot delete a tag: %v", err)
	}
	if got := fmt.Sprint(scan(c2)); strings.Contains(got, "1.0.0") {
		t.Errorf("a deleted tag is still listed: %s", got)
	}
	store, _ := sqlite.Open(context.Background(), dbPath)
	defer store.Close()
	cached, _ := store.CachedTags(context.Background(), repo)
	if _, ok := cached["1.0.0"]; ok || len(cached) != 6-1 {
		t.Errorf("cache after the delete: %v", cached)
	}
	// Beside the creation time, the cache keeps each image's config digest.
	if ct := cached["1.1.0"]; !strings.HasPrefix(ct.ConfigDigest, "sha256:") || !ct.HasCreated {
		t.Errorf("cached 1.1.0: %+v; want its config digest and creation time", ct)
	}
}

// A secret created after fluxd read the secrets: the 401 makes fluxd read
// them again, once, before it reports an error.
func TestCredentialsAreReReadAfterA401(t *testing.T) {
	host := privateRegistry(t)
	var secrets []Credentials
	reads := 0
	kc := NewSecretKeychain(func(context.Context) ([]Credentials, error) { reads++; return secrets, nil }, time.Hour)
	c, err := New(Config{Keychains: []authn.Keychain{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tags(context.Background(), host+"/private"); err == nil {
		t.Fatal("listed a private repository without credentials")
	}
	// The secret appears; the cached (empty) credentials are an hour old
	// at most, but the 401 makes fluxd look again.
	secrets = []Credentials{{Source: "--registry-secret default/new", Global: true, DockerConfig: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"pw"}}}`)}}
	before := reads
	tags, err := c.Tags(context.Background(), host+"/private")
	if err != nil || len(tags) != 1 {
		t.Fatalf("after the secret appeared: %v, %v", tags, err)
	}
	if reads != before+1 {
		t.Errorf("secrets read %d more times, want once", reads-before)
	}
}

func TestMetrics(t *testing.T) {
	p := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 100}
	srv := httptest.NewServer(p)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/app:1.0.0", imageAt(t, time.Now(), nil))
	push(t, host+"/app:latest", imageAt(t, time.Now(), nil))
	reg := prometheus.NewRegistry()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	c, err := New(Config{Metrics: NewMetrics(reg), Cache: store, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Images(context.Background(), host+"/app"); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour) // latest is due for its re-check
	}
	m := c.cfg.Metrics
	if got := testutil.ToFloat64(m.requests.WithLabelValues(host, "GET", "200")); got < 3 {
		t.Errorf("GET 200 requests = %v, want at least the list, 2 manifests and configs", got)
	}
	for result, want := range map[string]float64{"miss": 2, "hit": 1, "checked": 1} {
		if got := testutil.ToFloat64(m.cache.WithLabelValues(result)); got != want {
			t.Errorf("cache %s = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(m.tags.WithLabelValues(host + "/app")); got != 2 {
		t.Errorf("tags gauge = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.rate.WithLabelValues(host)); got != 100 {
		t.Errorf("rate gauge = %v, want the default 100", got)
	}
	if n := testutil.CollectAndCount(m.scan); n != 1 {
		t.Errorf("scan histogram series = %d, want 1", n)
	}
}

// A registry that rejects pages bigger than 100 tags: the page size
// setting serves it, and pagination still reads every tag.
func TestPageSize(t *testing.T) {
	// The pager adds the Link headers the in-process registry lacks.
	inner := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 2}
	var lists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			lists.Add(1)
			if n := r.URL.Query().Get("n"); n != "" && n != "2" {
				http.Error(w, `{"errors":[{"code":"PAGINATION_NUMBER_INVALID","message":"page size too large"}]}`, http.StatusBadRequest)
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tag := range []string{"1", "2", "3"} {
		push(t, host+"/app:"+tag, imageAt(t, time.Now(), nil))
	}
	big, _ := New(Config{})
	if _, err := big.Tags(context.Background(), host+"/app"); err == nil {
		t.Fatalf("the default page size was accepted; the test registry should refuse it")
	}
	small, _ := New(Config{PageSize: 2})
	lists.Store(0)
	tags, err := small.Tags(context.Background(), host+"/app")
	if err != nil || len(tags) != 3 {
		t.Fatalf("page size 2: %v %v", tags, err)
	}
	if lists.Load() != 2 {
		t.Errorf("3 tags in %d list requests; want 2 pages of 2", lists.Load())
	}
}
