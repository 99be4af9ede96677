package oci

import (
	"context"
	"log/slog"
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

// clockSkew is how far ahead of this clock a stored list's read may have
// begun before the list is taken for one from a clock that runs ahead,
// and read again rather than trusted.
const clockSkew = time.Minute

// storedList is the list the store keeps for repository, or nil. It is
// put in memory when memory has none, due or not, so that the read that
// follows a due one counts the list's stability on from it; it is
// returned only while its next read is not due. A stored list is never
// taken for one read for a scan (its seq is 0): it removes no cached tag.
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
	if !ok || sl.ReadAt.After(now.Add(clockSkew)) {
		return nil
	}
	// A list is reused no longer than this fluxd's ListMax after its read,
	// whatever the instance that stored it was configured with.
	next := sl.Next
	if limit := sl.ReadAt.Add(c.cfg.ListMax); next.After(limit) {
		next = limit
	}
	l := &tagList{tags: sl.Tags, stable: sl.Stable, next: next}
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

// saveList writes a list read from the registry to the store, in the
// background: the caller has its list already.
func (c *Client) saveList(repository string, l *tagList, readAt time.Time) {
	c.saving.Add(1)
	go func() {
		defer c.saving.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ListStoreTimeout)
		defer cancel()
		err := c.cfg.Lists.SaveTagList(ctx, repository, registry.TagList{Tags: l.tags, Stable: l.stable, Next: l.next, ReadAt: readAt})
		if err != nil {
			c.warnStore(ctx, "writing", repository, err)
		}
	}()
}

// WaitSaved waits for the lists being written to the store.
func (c *Client) WaitSaved() { c.saving.Wait() }

// warnStore logs a failing list store at most once a minute (debug
// level in between): each repository would otherwise warn at once.
func (c *Client) warnStore(ctx context.Context, doing, repository string, err error) {
	level := slog.LevelDebug
	now := time.Now().UnixNano()
	if last := c.storeWarned.Load(); now-last > int64(time.Minute) && c.storeWarned.CompareAndSwap(last, now) {
		level = slog.LevelWarn
	}
	c.cfg.Log.Log(ctx, level, "the history store's tag lists failed; reading tag lists from the registry instead",
		"component", "registry", "doing", doing, "repository", repository, "err", err)
}
