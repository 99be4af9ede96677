package oci

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/fluxd/fluxd/registry"
)

// ListStore keeps tag lists across restarts (the history store's
// registry_lists table). SaveTagList keeps, of two lists of one
// repository, the one whose read began last (ReadAt).
type ListStore interface {
	TagList(ctx context.Context, repository string) (registry.TagList, bool, error)
	SaveTagList(ctx context.Context, repository string, l registry.TagList) error
}

// ListStoreTimeout bounds a read or a write of a stored list: a store
// that does not answer makes fluxd read the registry instead, and holds
// up no scan.
const ListStoreTimeout = 2 * time.Second

// storeRest is how long a list store that failed a read is not asked
// again (lists are read from the registry meanwhile).
const storeRest = 30 * time.Second

// storedList is the list the store keeps for repository, or nil. It is
// put in memory when memory has none, due or not, so that the read that
// follows a due one counts the list's stability on from it; it is
// returned only while its next read is not due. A stored list is never
// taken for one read for a scan (its seq is 0): it removes no cached tag.
//
// A stored list is input like a registry's answer: another replica, or
// anyone who can write the shared store, wrote it. Its tags pass the OCI
// grammar check again (a tag picked from a list alone goes into git), and
// one bigger than MaxTagListBytes is not used.
func (c *Client) storedList(ctx context.Context, repository string) *tagList {
	if time.Now().UnixNano() < c.storeDownUntil.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ListStoreTimeout)
	defer cancel()
	sl, ok, err := c.cfg.Lists.TagList(ctx, repository)
	if err != nil {
		// A store that failed is left alone for a while: one that hangs
		// would otherwise cost every repository ListStoreTimeout.
		c.storeDownUntil.Store(time.Now().Add(storeRest).UnixNano())
		c.warnStore(ctx, "reading", repository, err)
		return nil
	}
	now := c.cfg.Now()
	if !ok || sl.ReadAt.After(now.Add(registry.ListClockSkew)) {
		return nil
	}
	size := 0
	for _, t := range sl.Tags {
		size += len(t) + 1
	}
	if int64(size) > c.cfg.MaxTagListBytes {
		return nil
	}
	tags := c.validTags(ctx, repository, sl.Tags)
	slices.Sort(tags)
	// A list is reused no longer than this fluxd's ListMax after its read,
	// whatever the instance that stored it was configured with.
	next := sl.Next
	if limit := sl.ReadAt.Add(c.cfg.ListMax); next.After(limit) {
		next = limit
	}
	l := &tagList{tags: tags, stable: sl.Stable, next: next}
	c.mu.Lock()
	cur, had := c.lists[repository]
	if !had {
		c.lists[repository] = l
	}
	c.mu.Unlock()
	if had {
		l = cur // read meanwhile
	}
	if !now.Before(l.next) {
		return nil
	}
	return l
}

// saveList queues a list read from the registry for the store. One
// writer writes the queue in the background (the caller has its list
// already), the latest list of each repository only: a burst of reads at
// start-up holds at most one of the store's connections, not one each.
// After Close, nothing is queued.
func (c *Client) saveList(repository string, l *tagList, readAt time.Time) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if c.closed {
		return
	}
	if c.toSave == nil {
		c.toSave = map[string]registry.TagList{}
	}
	c.toSave[repository] = registry.TagList{Tags: l.tags, Stable: l.stable, Next: l.next, ReadAt: readAt}
	if c.writing {
		return
	}
	c.writing = true
	c.saving.Add(1)
	go c.writeLists()
}

// writeLists writes the queued lists until the queue is empty.
func (c *Client) writeLists() {
	defer c.saving.Done()
	for {
		c.saveMu.Lock()
		batch := c.toSave
		c.toSave = nil
		if len(batch) == 0 {
			c.writing = false
			c.saveMu.Unlock()
			return
		}
		c.saveMu.Unlock()
		for repository, l := range batch {
			ctx, cancel := context.WithTimeout(context.Background(), ListStoreTimeout)
			if err := c.cfg.Lists.SaveTagList(ctx, repository, l); err != nil {
				c.warnStore(ctx, "writing", repository, err)
			}
			cancel()
		}
	}
}

// WaitSaved waits for the lists queued for the store to be written.
func (c *Client) WaitSaved() { c.saving.Wait() }

// warnStore logs a failing list store at most once a minute (debug
// level in between): each repository would otherwise warn at once.
func (c *Client) warnStore(ctx context.Context, doing, repository string, err error) {
	level := slog.LevelDebug
	now := time.Now().UnixNano()
	if last := c.storeWarned.Load(); now-last > int64(time.Minute) && c.storeWarned.CompareAndSwap(last, now) {
		level = slog.LevelWarn
	}
	msg := "the history store failed to give a kept tag list; reading tag lists from the registry instead"
	if doing == "writing" {
		msg = "the history store failed to keep a tag list; a restarted fluxd will read it from the registry again"
	}
	c.cfg.Log.Log(ctx, level, msg, "component", "registry", "repository", repository, "err", err)
}
