package release

import (
	"context"

	"github.com/fluxd/fluxd/registry"
	"golang.org/x/sync/errgroup"
)

// imageCache reads each repository once per plan, and only what the
// policies need: the tag list alone for orders by version, name or number;
// metadata only for the tags a filter passes when ordering by build time.
type imageCache struct {
	images Images
	byKey  map[listKey]cached
	tags   map[string]cachedTags
	found  map[string]cachedExists
	// heads are the digests a promotion read with a HEAD (promote.go),
	// by headKey: the rest of its plan reads those, not the cache.
	heads map[string]cachedDigest
	// verdicts are the plan's signature verifications (verify.go).
	verdicts map[verdictKey]verdictAnswer
	// best is newest's answer by repository and policy: the workloads
	// that share both share one ranking of the repository's tags.
	best map[bestKey]cachedBest
	// offline answers only what was read before (a plan under the git
	// lock): a read not made yet sets missed and fails.
	offline, missed bool
}

type cachedExists struct {
	ok  bool
	err error
}

// listKey is a repository's list under one filter.
type listKey struct{ repository, filter string }

type cached struct {
	imgs []registry.Image
	err  error
}

// bestKey is a repository under one policy: its filter, bound to the
// running tag where that matters (Key), and what Key leaves out.
type bestKey struct {
	repository, filter string
	order              registry.Order
	prerelease         bool
}

type cachedBest struct {
	img   registry.Image
	cands int
}

type cachedTags struct {
	tags []string
	err  error
}

func newImageCache(images Images) *imageCache {
	return &imageCache{images: images, byKey: map[listKey]cached{}, tags: map[string]cachedTags{}, found: map[string]cachedExists{}}
}

// exists checks that ref is in its registry, once per plan.
func (c *imageCache) exists(ctx context.Context, ref string) (bool, error) {
	if r, ok := c.found[ref]; ok {
		return r.ok, r.err
	}
	if c.offline {
		c.missed = true
		return false, errRegistryUnderLock
	}
	ok, err := c.images.Exists(ctx, ref)
	c.found[ref] = cachedExists{ok, err}
	return ok, err
}

// get lists every image of a repository, newest first.
func (c *imageCache) get(ctx context.Context, repo string) ([]registry.Image, error) {
	return c.matching(ctx, repo, registry.EveryTag)
}

func (c *imageCache) matching(ctx context.Context, repo string, f registry.Filter) ([]registry.Image, error) {
	key := listKey{repo, f.Key()}
	if r, ok := c.byKey[key]; ok {
		return r.imgs, r.err
	}
	if c.offline {
		c.missed = true
		return nil, errRegistryUnderLock
	}
	imgs, err := c.images.ImagesMatching(ctx, repo, f.Match)
	c.byKey[key] = cached{imgs, err}
	return imgs, err
}

func (c *imageCache) tagList(ctx context.Context, repo string) ([]string, error) {
	if r, ok := c.tags[repo]; ok {
		return r.tags, r.err
	}
	if c.offline {
		c.missed = true
		return nil, errRegistryUnderLock
	}
	tags, err := c.images.Tags(ctx, repo)
	c.tags[repo] = cachedTags{tags, err}
	return tags, err
}

// prefetchConcurrency bounds the tag lists a plan reads at once before
// it decides: the registry client's per-host rate limit still applies.
const prefetchConcurrency = 8

// prefetchTags reads the tag lists of repos that the plan has not read,
// several at once, so that a plan over many repositories waits for the
// slowest of a few reads at a time rather than for each in turn (at
// 1,000 repositories, read one after the other beside a busy start-up
// sync, the automator's first pass took 30 s). What each read answers,
// its error too, is kept as tagList keeps it; a read the plan then does
// not need costs one request.
func (c *imageCache) prefetchTags(ctx context.Context, repos []string) {
	if c.offline {
		return
	}
	var todo []string
	seen := map[string]bool{}
	for _, r := range repos {
		if _, ok := c.tags[r]; !ok && !seen[r] {
			seen[r] = true
			todo = append(todo, r)
		}
	}
	if len(todo) < 2 {
		return // nothing to overlap
	}
	got := make([]cachedTags, len(todo))
	g := errgroup.Group{}
	g.SetLimit(prefetchConcurrency)
	for i, r := range todo {
		g.Go(func() error {
			tags, err := c.images.Tags(ctx, r)
			got[i] = cachedTags{tags, err}
			return nil
		})
	}
	_ = g.Wait()
	for i, r := range todo {
		c.tags[r] = got[i]
	}
}

// Newest returns the best image of repository that the filter f passes
// and how many it passes, as a plan finds it for a container under that
// policy: from the tag list alone for orders by version, name or number,
// with metadata only for the passing tags under build time.
func Newest(ctx context.Context, images Images, repository string, f registry.Filter) (registry.Image, int, error) {
	return newImageCache(images).newest(ctx, repository, f)
}

// newest returns the best image a filter passes and how many it passes.
// Under orders other than build time the image carries its tag only.
func (c *imageCache) newest(ctx context.Context, repo string, f registry.Filter) (registry.Image, int, error) {
	if f.NeedsMetadata() {
		imgs, err := c.matching(ctx, repo, f)
		if err != nil || len(imgs) == 0 {
			return registry.Image{}, 0, err
		}
		return imgs[0], len(imgs), nil
	}
	key := bestKey{repo, f.Key(), f.Order, f.Prerelease}
	if r, ok := c.best[key]; ok {
		return r.img, r.cands, nil
	}
	tags, err := c.tagList(ctx, repo)
	if err != nil {
		return registry.Image{}, 0, err
	}
	if c.best == nil {
		c.best = map[bestKey]cachedBest{}
	}
	var pass []string
	for _, t := range tags {
		if f.Match(t) {
			pass = append(pass, t)
		}
	}
	if len(pass) == 0 {
		c.best[key] = cachedBest{}
		return registry.Image{}, 0, nil
	}
	f.Rank(pass)
	c.best[key] = cachedBest{registry.Image{Repository: repo, Tag: pass[0]}, len(pass)}
	return c.best[key].img, len(pass), nil
}

// dated returns the running tag's image when its creation time is known:
// from the list its filter read, or with a read of that one tag (a tag
// the filter does not pass).
func (c *imageCache) dated(ctx context.Context, repo string, f registry.Filter, tag string) (registry.Image, bool) {
	if r, ok := c.byKey[listKey{repo, f.Key()}]; ok {
		if img, ok := findTag(r.imgs, tag); ok {
			return img, img.Dated()
		}
	}
	imgs, err := c.matching(ctx, repo, registry.Filter{Kind: "glob", Pattern: tag})
	if err != nil || len(imgs) == 0 {
		return registry.Image{}, false
	}
	return imgs[0], imgs[0].Dated()
}

func findTag(imgs []registry.Image, tag string) (registry.Image, bool) {
	for _, i := range imgs {
		if i.Tag == tag {
			return i, true
		}
	}
	return registry.Image{}, false
}
