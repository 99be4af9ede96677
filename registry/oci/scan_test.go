package oci

import (
	"context"
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

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.uber.org/goleak"

	"github.com/fluxd/fluxd/history/sqlite"
)

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

// A registry that stalls one repository's manifests: that scan fails
// after its timeout, the other repository's scan is not held up, and no
// goroutine is left behind.
func TestStalledRepositoryTimesOutAlone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stall atomic.Bool
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall.Load() && strings.Contains(r.URL.Path, "/stuck/manifests/") {
			<-r.Context().Done() // never answers
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/stuck:1.0.0", imageAt(t, time.Now(), nil))
	push(t, host+"/good:1.0.0", imageAt(t, time.Now(), nil))
	stall.Store(true)

	c, err := New(Config{RequestTimeout: 200 * time.Millisecond, ScanTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stuck := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Images(context.Background(), host+"/stuck")
		stuck <- err
	}()
	time.Sleep(50 * time.Millisecond) // the stuck scan is under way
	imgs, err := c.Images(context.Background(), host+"/good")
	if err != nil || len(imgs) != 1 {
		t.Errorf("the good repository, beside a stalled one: %v %v", imgs, err)
	}
	select {
	case err := <-stuck:
		if err == nil {
			t.Errorf("the stalled scan succeeded")
		}
		if !strings.Contains(err.Error(), host) {
			t.Errorf("the stalled scan's error does not name the registry: %v", err)
		}
		t.Logf("stalled scan ended after %v: %v", time.Since(start).Round(10*time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled scan never ended")
	}
	if st := c.Status(host + "/stuck"); st.Refreshing || st.LastError == "" {
		t.Errorf("status after the stall: %+v", st)
	}
}
