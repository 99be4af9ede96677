package oci

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
)

type gated struct {
	next  http.RoundTripper
	armed atomic.Bool
	gate  chan struct{}
}

func (g *gated) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(r)
	if strings.Contains(r.URL.Path, "/tags/list") && g.armed.CompareAndSwap(true, false) {
		<-g.gate // the registry answered with the list before the push
	}
	return resp, err
}

// A notification's forced list joins a list read that began before the push.
func TestForcedListDoesNotJoinAnOlderRead(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repo, 0, 5, t0); err != nil {
		t.Fatal(err)
	}
	g := &gated{next: http.DefaultTransport, gate: make(chan struct{})}
	c, err := New(Config{Transport: g, ListMin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	done := make(chan struct{})
	go func() { _, _ = c.Images(ctx, repo); close(done) }() // e.g. the automator's pass
	time.Sleep(200 * time.Millisecond)
	if err := reg.PushVersions(ctx, repo, 5, 6, t0); err != nil { // the push
		t.Fatal(err)
	}
	res := make(chan int, 1)
	go func() { imgs, _ := c.Refresh(ctx, repo); res <- len(imgs) }() // its notification
	time.Sleep(200 * time.Millisecond)
	close(g.gate)
	<-done
	n := <-res
	tags, _ := c.Tags(ctx, repo)
	t.Logf("the notification's Refresh saw %d images; Tags afterwards (fresh for ListMin) %d; the registry has 6", n, len(tags))
	if n != 6 || len(tags) != 6 {
		t.Errorf("the push is hidden")
	}
}

// Two replicas share one cache. Replica A keeps its tag list in memory
// for ListMin; replica B sees a push and caches the new tag. A's next scan,
// answered from its older list, must not remove the tag B cached: only a
// list read from the registry during a scan may remove cached tags.
func TestReusedListDoesNotRemoveTagsAnotherReplicaCached(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repo, 0, 5, t0); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	replica := func() *Client {
		c, err := New(Config{Cache: store, ListMin: time.Minute, ListMax: 5 * time.Minute, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := replica(), replica()
	if _, err := a.Images(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := reg.PushVersions(ctx, repo, 5, 6, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Refresh(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Images(ctx, repo); err != nil { // list reused from memory
		t.Fatal(err)
	}
	cached, err := store.CachedTags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached) != 6 {
		t.Errorf("the cache holds %d tags after replica A's scan with its older list, want 6 (B's pushed tag kept)", len(cached))
	}
}
