package oci

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/registry"
)

// Cache keeps registry metadata across restarts (history/sqlite is one).
type Cache interface {
	CachedTags(ctx context.Context, repository string) (map[string]registry.CachedTag, error)
	// SaveTags records tags' digests and digests' creation times, and
	// forgets removed tags, in one write.
	SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, images map[string]registry.ImageMeta, removed []string) error
}

// Images returns every tag of a repository with its digest and creation
// time, newest first. It refreshes incrementally against the cache: the
// tag list is read (following pagination); a tag the cache knows and that
// is immutable (a version or a commit hash) costs nothing more; a known
// mutable tag ("latest", a branch) costs one manifest HEAD; only new or
// moved tags cost a manifest GET, and a config blob is fetched once per
// new digest. Tags gone from the registry leave the cache. A tag whose
// metadata cannot be read is left out, unless none can, which is an error.
func (c *Client) Images(ctx context.Context, repository string) ([]registry.Image, error) {
	return c.scan(ctx, repository, nil, false)
}

// ImagesMatching is Images for the tags keep passes (all when keep is
// nil): tags a policy filters out cost no request at all.
func (c *Client) ImagesMatching(ctx context.Context, repository string, keep func(tag string) bool) ([]registry.Image, error) {
	return c.scan(ctx, repository, keep, false)
}

// Refresh is Images for a repository that was just pushed to (a
// notification): the tag list is read now, and every known mutable tag is
// checked now, whatever its re-check interval. A repository the cache
// knows nothing of (one only ever ordered by version, or never listed)
// is only listed: its images are returned without digests or times, and
// whoever needs their metadata reads it then (a plan under build-time
// order reads the tags its filter passes).
func (c *Client) Refresh(ctx context.Context, repository string) ([]registry.Image, error) {
	if c.cfg.Cache != nil {
		cached, err := c.cfg.Cache.CachedTags(ctx, repository)
		if err == nil && len(cached) == 0 {
			tags, err := c.tags(ctx, repository, true)
			if err != nil {
				return nil, err
			}
			out := make([]registry.Image, len(tags))
			for i, t := range tags {
				out[i] = registry.Image{Repository: repository, Tag: t}
			}
			return out, nil
		}
	}
	return c.scan(ctx, repository, nil, true)
}

// Cached returns the images the cache knows for a repository, newest
// first (undated last), without any request: for answering while a
// refresh runs. Without a cache it returns none.
func (c *Client) Cached(ctx context.Context, repository string) ([]registry.Image, error) {
	if c.cfg.Cache == nil {
		return nil, nil
	}
	cached, err := c.cfg.Cache.CachedTags(ctx, repository)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Image, 0, len(cached))
	for tag, ct := range cached {
		if !registry.ValidTag(tag) {
			continue // cached before tags were checked
		}
		out = append(out, registry.Image{Repository: repository, Tag: tag, Digest: ct.Digest, CreatedAt: ct.CreatedAt})
	}
	registry.SortNewestFirst(out)
	return out, nil
}

func (c *Client) scan(ctx context.Context, repository string, keep func(tag string) bool, force bool) (imgs []registry.Image, err error) {
	end := c.begin(repository)
	defer func() { end(err) }()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ScanTimeout)
	defer cancel()
	start := time.Now()
	before := c.lastSeq()
	list, err := c.list(ctx, repository, force)
	if err != nil {
		return nil, err
	}
	all := list.tags
	// Only a list read from the registry for this scan may remove cached
	// tags: a list reused from memory (up to ListMax old) lacks tags that
	// another replica sharing the cache has seen pushed since.
	readNow := list.seq > before
	tags := all
	if keep != nil {
		tags = make([]string, 0, len(all))
		for _, t := range all {
			if keep(t) {
				tags = append(tags, t)
			}
		}
	}
	repo, _ := name.NewRepository(repository, name.WeakValidation)
	if m := c.cfg.Metrics; m != nil {
		defer func() {
			m.scan.WithLabelValues(repo.RegistryStr()).Observe(time.Since(start).Seconds())
			m.tags.WithLabelValues(repository).Set(float64(len(all)))
		}()
	}
	cached := map[string]registry.CachedTag{}
	if c.cfg.Cache != nil {
		if cached, err = c.cfg.Cache.CachedTags(ctx, repository); err != nil {
			cached = map[string]registry.CachedTag{}
		}
	}
	metas := c.created
	if c.cfg.Cache != nil {
		metas = newMetaSet()
		for _, ct := range cached {
			if ct.HasCreated {
				metas.put(ct.Digest, registry.ImageMeta{CreatedAt: ct.CreatedAt, ConfigDigest: ct.ConfigDigest, Platform: ct.Platform, Labels: ct.Labels})
			}
		}
	}

	images := make([]registry.Image, len(tags))
	errs := make([]error, len(tags))
	var (
		changedMu sync.Mutex
		changed   = map[string]registry.TagState{}
		created   = map[string]registry.ImageMeta{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for i, tag := range tags {
		g.Go(func() error {
			ct, known := cached[tag]
			img, st, err := c.image(gctx, repo.Tag(tag), ct, known, force, metas)
			if err != nil {
				errs[i] = err
				return nil
			}
			img.Repository = repository
			images[i] = img
			if st != nil {
				changedMu.Lock()
				changed[tag] = *st
				if st.Stable == 0 {
					created[img.Digest], _ = metas.get(img.Digest)
				}
				// A long scan writes what it read as it goes, so that
				// list-images can show it (and a restart keeps it).
				var batch map[string]registry.TagState
				var batchImgs map[string]registry.ImageMeta
				if c.cfg.Cache != nil && len(changed) >= c.cfg.SaveEvery {
					batch, batchImgs = changed, created
					changed, created = map[string]registry.TagState{}, map[string]registry.ImageMeta{}
				}
				changedMu.Unlock()
				if batch != nil {
					_ = c.cfg.Cache.SaveTags(ctx, repository, batch, batchImgs, nil)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	out := images[:0]
	var firstErr error
	for i, img := range images {
		if errs[i] != nil {
			if firstErr == nil {
				firstErr = errs[i]
			}
			continue
		}
		out = append(out, img)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, c.explain(repository, repo, firstErr)
	}
	if c.cfg.Cache != nil {
		listed := make(map[string]bool, len(all))
		for _, t := range all {
			listed[t] = true
		}
		var removed []string
		for t := range cached {
			if readNow && !listed[t] {
				removed = append(removed, t)
			}
		}
		if len(changed) > 0 || len(removed) > 0 {
			_ = c.cfg.Cache.SaveTags(ctx, repository, changed, created, removed)
		}
	}
	registry.SortNewestFirst(out)
	return out, nil
}

// image reads one tag's digest and creation time, as cheaply as the cache
// allows: a known immutable tag, or a known mutable one whose re-check is
// not due, costs nothing; a due mutable tag costs a HEAD. st, when not
// nil, is the tag's new state for the cache (Stable 0: new or moved).
func (c *Client) image(ctx context.Context, tag name.Tag, ct registry.CachedTag, known, force bool, metas *metaSet) (img registry.Image, st *registry.TagState, err error) {
	img = registry.Image{Tag: tag.TagStr()}
	now := c.cfg.Now()
	if known && ct.HasCreated {
		if registry.Immutable(img.Tag) || (!force && now.Before(ct.NextCheck)) {
			c.lookup("hit")
			img.Digest, img.CreatedAt = ct.Digest, ct.CreatedAt
			return img, nil, nil
		}
		head, err := c.puller.Load().Head(ctx, tag)
		if err != nil {
			return img, nil, err
		}
		if head.Digest.String() == ct.Digest {
			c.lookup("checked")
			img.Digest, img.CreatedAt = ct.Digest, ct.CreatedAt
			stable := ct.Stable + 1
			return img, &registry.TagState{Digest: ct.Digest, Stable: stable, NextCheck: now.Add(c.recheck(stable))}, nil
		}
	}
	c.lookup("miss")
	desc, err := c.puller.Load().Get(ctx, tag)
	if err != nil {
		return img, nil, err
	}
	img.Digest = desc.Digest.String()
	meta, err, _ := c.inflight.Do(img.Digest, func() (any, error) {
		if m, known := metas.get(img.Digest); known {
			return m, nil
		}
		if m, known := c.fetched.get(img.Digest); known {
			return m, nil
		}
		m, err := c.meta(desc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tag, err)
		}
		c.fetched.put(img.Digest, m)
		return m, nil
	})
	if err != nil {
		return img, nil, err
	}
	// A scan of another repository may have read it (two repositories of
	// one image): this scan's set learns it too.
	metas.put(img.Digest, meta.(registry.ImageMeta))
	img.CreatedAt = meta.(registry.ImageMeta).CreatedAt
	return img, &registry.TagState{Digest: img.Digest, NextCheck: now.Add(c.recheck(0))}, nil
}

func (c *Client) lookup(result string) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.cache.WithLabelValues(result).Inc()
	}
}
