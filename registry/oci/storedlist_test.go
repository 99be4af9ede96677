package oci

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry"
)

// A restarted fluxd on the same history store answers a tag list read
// before the restart, while its next read is not due, with no request;
// once due, it reads it again and counts its stability on from the
// stored one.
func TestStoredListSurvivesARestart(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repo, 0, 5, t0); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	start := func() *Client {
		c, err := New(Config{Cache: store, Lists: store, ListMin: time.Minute, ListMax: 5 * time.Minute, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := start()
	want, err := first.Images(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // writes the list being saved
	reg.Reset()
	restarted := start()
	got, err := restarted.Images(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images after the restart (-before +after):\n%s", diff)
	}
	if n := reg.Requests(); n != 0 {
		t.Errorf("the restarted client sent %d requests for a list read 0 s before; want 0", n)
	}

	// Due (ListMin after a first read): read again, found the same, so
	// it counts as stable once and is kept for twice ListMin.
	now = now.Add(time.Minute)
	again := start()
	if _, err := again.Tags(ctx, repo); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if n := reg.Requests(); n != 1 {
		t.Errorf("a due stored list cost %d requests; want 1 (the tag list)", n)
	}
	l, ok, err := store.TagList(ctx, repo)
	if err != nil || !ok {
		t.Fatalf("stored list: %v %v", ok, err)
	}
	if l.Stable != 1 || !l.Next.Equal(now.Add(2*time.Minute)) || !l.ReadAt.Equal(now) || len(l.Tags) != 5 {
		t.Errorf("stored list after the second read: stable %d, next %v, read at %v, %d tags; want 1, %v, %v, 5", l.Stable, l.Next, l.ReadAt, len(l.Tags), now.Add(2*time.Minute), now)
	}
}

// A stored list is trusted no longer than this fluxd's ListMax after its
// read, whatever the instance that stored it allowed; and a list read
// "in the future" (a clock that runs ahead) is not trusted at all.
func TestStoredListIsBoundedByThisClock(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/app"
	ctx := context.Background()
	if err := reg.PushVersions(ctx, repo, 0, 3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		stored   registry.TagList
		requests int64
	}{
		{"due within ListMax", registry.TagList{Tags: []string{"0.0.0"}, ReadAt: now.Add(-time.Minute), Next: now.Add(time.Hour)}, 0},
		{"past ListMax", registry.TagList{Tags: []string{"0.0.0"}, ReadAt: now.Add(-6 * time.Minute), Next: now.Add(time.Hour)}, 1},
		{"read ahead of this clock", registry.TagList{Tags: []string{"0.0.0"}, ReadAt: now.Add(2 * time.Minute), Next: now.Add(4 * time.Minute)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memLists{lists: map[string]registry.TagList{repo: tc.stored}}
			c, err := New(Config{Lists: store, ListMin: time.Minute, ListMax: 5 * time.Minute, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			reg.Reset()
			if _, err := c.Tags(ctx, repo); err != nil {
				t.Fatal(err)
			}
			if n := reg.Requests(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// A history store that fails, or does not answer, costs a read from the
// registry (within ListStoreTimeout), never a failed or missing list,
// and is warned of once, not once per repository. After a failure the
// store is left alone for a while: a hanging one costs one timeout, not
// one per repository.
func TestStoreThatDoesNotAnswerHoldsUpNoList(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var repos []string
	for _, r := range []string{"a", "b", "c"} {
		repo := reg.Host() + "/" + r
		if err := reg.PushVersions(ctx, repo, 0, 2, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		repos = append(repos, repo)
	}
	for _, store := range []*memLists{{fail: errors.New("database is locked")}, {hang: true}} {
		var logs bytes.Buffer
		c, err := New(Config{Lists: store, ListMin: time.Minute, Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		for _, repo := range repos {
			tags, err := c.Tags(ctx, repo)
			if err != nil || len(tags) != 2 {
				t.Fatalf("hang %v: %s: %v %v; want the registry's 2 tags", store.hang, repo, tags, err)
			}
		}
		c.Close()
		if n := store.reads.Load(); n != 1 {
			t.Errorf("hang %v: the store was asked %d times for 3 repositories after failing; want 1", store.hang, n)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Errorf("hang %v: %d warnings for 3 repositories, want 1:\n%s", store.hang, n, logs.String())
		}
	}
}

// memLists is a ListStore in memory that can fail or hang.
type memLists struct {
	lists map[string]registry.TagList
	fail  error
	hang  bool
	reads atomic.Int64
}

func (m *memLists) TagList(ctx context.Context, repository string) (registry.TagList, bool, error) {
	m.reads.Add(1)
	if m.hang {
		<-ctx.Done()
		return registry.TagList{}, false, ctx.Err()
	}
	if m.fail != nil {
		return registry.TagList{}, false, m.fail
	}
	l, ok := m.lists[repository]
	return l, ok, nil
}

func (m *memLists) SaveTagList(ctx context.Context, repository string, l registry.TagList) error {
	if m.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return m.fail
}

// A stored list is input like a registry's answer: another replica, or
// anyone who can write the shared store, wrote it. Tags that break the
// OCI grammar are dropped as a registry's are (a tag picked from a list
// alone goes into git), and a list over MaxTagListBytes is read again
// from the registry instead of used.
func TestStoredListTagsAreCheckedAgain(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/app"
	ctx := context.Background()
	if err := reg.PushVersions(ctx, repo, 0, 3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	hostile := registry.TagList{Tags: registry.SplitTags("2.0.0\n1.0\" injected: x\n\n../../x\n9.9.9 #\n1.5.0"), ReadAt: now, Next: now.Add(time.Minute)}
	c, err := New(Config{Lists: &memLists{lists: map[string]registry.TagList{repo: hostile}}, ListMin: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	tags, err := c.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1.5.0", "2.0.0"}, tags); diff != "" {
		t.Errorf("tags of a hostile stored list (-want +got):\n%s", diff)
	}
	if n := reg.Requests(); n != 0 {
		t.Errorf("%d requests; the stored list's valid tags answer", n)
	}

	huge := registry.TagList{Tags: []string{"1.0.0", strings.Repeat("a", 100)}, ReadAt: now, Next: now.Add(time.Minute)}
	c, err = New(Config{Lists: &memLists{lists: map[string]registry.TagList{repo: huge}}, ListMin: time.Minute, MaxTagListBytes: 64, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	if tags, err = c.Tags(ctx, repo); err != nil || len(tags) != 3 {
		t.Errorf("a stored list over MaxTagListBytes: %v %v; want the registry's 3 tags", tags, err)
	}
}

// Lists read in a burst are written by one writer, the latest of each
// repository; after Close nothing more is queued (a read racing with
// shutdown does not write to a closed store).
func TestListsAreSavedByOneWriter(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	ctx := context.Background()
	var repos []string
	for i := range 20 {
		repo := reg.Host() + "/app-" + strings.Repeat("x", i%3) + string(rune('a'+i))
		if err := reg.PushVersions(ctx, repo, 0, 1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		repos = append(repos, repo)
	}
	store := &countingLists{}
	c, err := New(Config{Lists: store, ListMin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range repos {
		if _, err := c.Tags(ctx, repo); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if got := store.saved.Load(); got != int64(len(repos)) {
		t.Errorf("%d lists saved, want %d", got, len(repos))
	}
	if max := store.maxAtOnce.Load(); max != 1 {
		t.Errorf("%d writes at once, want 1", max)
	}
	if _, err := c.RefreshTags(ctx, repos[0]); err != nil {
		t.Fatal(err)
	}
	c.WaitSaved()
	if got := store.saved.Load(); got != int64(len(repos)) {
		t.Errorf("a list read after Close was saved (%d saves)", got)
	}
}

type countingLists struct {
	saved, now, maxAtOnce atomic.Int64
}

func (c *countingLists) TagList(context.Context, string) (registry.TagList, bool, error) {
	return registry.TagList{}, false, nil
}

func (c *countingLists) SaveTagList(context.Context, string, registry.TagList) error {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		m := c.maxAtOnce.Load()
		if n <= m || c.maxAtOnce.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	c.saved.Add(1)
	return nil
}
