package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
)

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

// hostileTags adds tags to every tag list of the registry behind it, as a
// hostile or broken registry could.
type hostileTags struct {
	next  http.Handler
	extra []string
}

func (h hostileTags) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/tags/list") {
		h.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body.Tags = append(body.Tags, h.extra...)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func TestTagsBreakingTheGrammarAreDropped(t *testing.T) {
	hostile := []string{
		"1.0\nimage: evil",
		`a"b`,
		"1.1 # comment",
		"",
		"-leading-dash",
		".hidden",
		"with/slash",
		"naïve",
		strings.Repeat("a", 129),
	}
	srv := httptest.NewServer(hostileTags{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), extra: hostile})
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/app"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	push(t, repo+":1.0", imageAt(t, t0, nil))
	push(t, repo+":_under", imageAt(t, t0.Add(time.Hour), nil))
	push(t, repo+":"+strings.Repeat("b", 128), imageAt(t, t0.Add(2*time.Hour), nil))

	var logs bytes.Buffer
	c, err := New(Config{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := []string{"1.0", "_under", strings.Repeat("b", 128)}
	tags, err := c.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	imgs, err := c.Images(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, img := range imgs {
		got = append(got, img.Tag)
	}
	if diff := cmp.Diff([]string{strings.Repeat("b", 128), "_under", "1.0"}, got); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}

	// One warning for the repository, naming it; debug lines after.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "time=") || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], "level=DEBUG") {
		t.Fatalf("want a warning then a debug line, got:\n%s", logs.String())
	}
	t.Log(lines[0])
	for _, s := range []string{"repository=" + repo, "dropped=9", `1.0\\nimage: evil`} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("warning %q does not say %q", lines[0], s)
		}
	}
}
