package oci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// CreatedLabel is the OCI annotation/label that, where present, gives an
// image's creation time in preference to the config's created field.
const CreatedLabel = "org.opencontainers.image.created"

// Config configures a Client.
type Config struct {
	// DockerConfig is a docker config.json with registry credentials;
	// empty means the default docker locations ($DOCKER_CONFIG, ~/.docker).
	DockerConfig string
	// Concurrency bounds the metadata requests in flight per repository;
	// default 8.
	Concurrency int
	// Platform picks the image of a multi-platform index; default
	// linux/amd64.
	Platform string
	// Transport is the HTTP transport; default http.DefaultTransport.
	Transport http.RoundTripper
	// Keychains are tried before DockerConfig and the default locations,
	// e.g. a SecretKeychain over the workloads' image pull secrets. The
	// first that has credentials for a repository gives them; a
	// SecretKeychain's source is named when a registry refuses them.
	Keychains []authn.Keychain
	// Cache, if set, keeps tag digests and creation times across
	// restarts; without it they are kept in memory only.
	Cache Cache
	// Rate bounds the requests to each registry host.
	Rate RateConfig
	// Metrics, if set, count requests, cache use, scans and rates.
	Metrics *Metrics
	// RecheckMin and RecheckMax bound the adaptive interval between
	// manifest HEADs of a mutable tag ("latest", a branch): RecheckMin
	// after a change, doubling while the digest stays the same, up to
	// RecheckMax. Defaults 1m and 1h. A notification (Refresh) checks at
	// once.
	RecheckMin, RecheckMax time.Duration
	// ListMin and ListMax, when ListMin is above zero, let a repository's
	// tag list be reused instead of read again: by the same adaptive rule
	// as a mutable tag, for ListMin after it changed, doubling while it
	// stays the same, up to ListMax (default 5m). A notification
	// (Refresh) reads it at once. Zero (the default) reads the list on
	// every call.
	ListMin, ListMax time.Duration
	// SaveEvery is how many newly read tags a long scan gathers before it
	// writes them to the cache, so that a scan of a big repository shows
	// progress (and survives a restart) before it ends; default 256.
	SaveEvery int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// PageSize is the n of tag list requests: 0 keeps 1,000; negative
	// sends none, for registries that reject the parameter.
	PageSize int
	// RequestTimeout bounds the wait for a response's headers (default
	// 30s); ScanTimeout bounds a whole repository scan (default 10m).
	// Stalled requests fail, are retried like 5xx, and never hold up the
	// scans of other repositories.
	RequestTimeout, ScanTimeout time.Duration
	// MaxTagPages and MaxTagListBytes cap one repository's tag list: the
	// pages followed and the bytes read across them. Defaults
	// DefaultMaxTagPages and DefaultMaxTagListBytes. A list beyond
	// either fails with an error that says so.
	MaxTagPages     int
	MaxTagListBytes int64
	// Log hears of tags a registry lists that break the OCI tag grammar
	// (they are dropped): a warning the first time for each repository,
	// at debug level after. Default: discard.
	Log *slog.Logger
}

// Client reads registries.
type Client struct {
	cfg      Config
	platform v1.Platform
	opts     []remote.Option
	// puller is replaced when credentials are re-read after a 401: a
	// puller keeps the authenticated transport of each repository.
	puller    atomic.Pointer[remote.Puller]
	limiter   *rateLimiter
	transport http.RoundTripper
	// chain is every keychain in order; it remembers which source gave
	// each repository's credentials, for explain.
	chain *chain

	mu sync.Mutex
	// created is what is known of images by manifest digest, kept for
	// the client's life only without a Cache: with one, each scan knows
	// its repository's images from the cache, so that 100,000 cached tags
	// are not held in memory as well.
	created *metaSet
	// fetched are the images whose config this client read lately, for
	// another repository holding the same image (a mirror, a promotion):
	// its config is not read again.
	fetched *recentMetas
	status  map[string]*repoStatus
	// inflight makes concurrent lookups of one digest (two tags of one
	// image) share a single config fetch.
	inflight singleflight.Group
	// warned holds the repositories whose invalid tags were warned of.
	warned sync.Map
	// lists are the tag lists last read, by repository (see ListMin);
	// listing makes concurrent reads of one list share one.
	lists   map[string]*tagList
	listing singleflight.Group
	// listSeq numbers list reads in the order they start, so that a read
	// that began earlier and ends later never replaces a newer list, and
	// a scan can tell a list read for it from one read before it began.
	listSeq uint64
}

// tagList is a repository's tag list as last read.
type tagList struct {
	tags []string
	// stable counts the reads in a row that found the same list; next is
	// when the list is read again.
	stable int
	next   time.Time
	// seq is the number of the read that found the list (see listSeq).
	seq uint64
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Platform == "" {
		cfg.Platform = "linux/amd64"
	}
	if cfg.RecheckMin <= 0 {
		cfg.RecheckMin = time.Minute
	}
	if cfg.RecheckMax < cfg.RecheckMin {
		cfg.RecheckMax = max(time.Hour, cfg.RecheckMin)
	}
	if cfg.ListMin > 0 && cfg.ListMax < cfg.ListMin {
		cfg.ListMax = max(5*time.Minute, cfg.ListMin)
	}
	if cfg.SaveEvery <= 0 {
		cfg.SaveEvery = 256
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.ScanTimeout <= 0 {
		cfg.ScanTimeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTagPages <= 0 {
		cfg.MaxTagPages = DefaultMaxTagPages
	}
	if cfg.MaxTagListBytes <= 0 {
		cfg.MaxTagListBytes = DefaultMaxTagListBytes
	}
	plat, err := v1.ParsePlatform(cfg.Platform)
	if err != nil {
		return nil, fmt.Errorf("--registry-platform %q: %w", cfg.Platform, err)
	}
	chains := append([]authn.Keychain{}, cfg.Keychains...)
	if cfg.DockerConfig != "" {
		b, err := os.ReadFile(cfg.DockerConfig)
		if err != nil {
			return nil, fmt.Errorf("reading --docker-config: %w", err)
		}
		cf, err := parseDockerConfig(cfg.DockerConfig, b)
		if err != nil {
			return nil, err
		}
		chains = append(chains, namedKeychain{fileKeychain{cf}, "--docker-config " + cfg.DockerConfig})
	}
	chains = append(chains, namedKeychain{authn.DefaultKeychain, "the default docker config ($DOCKER_CONFIG or ~/.docker/config.json)"})
	keys := newChain(chains...)
	next := cfg.Transport
	if next == nil {
		// A transport of fluxd's own: a registry that accepts a request
		// and never answers fails it after RequestTimeout instead of
		// holding a scan (and the automator) forever.
		t := remote.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = cfg.RequestTimeout
		next = t
	}
	limiter := newRateLimiter(next, cfg.Rate, cfg.Metrics)
	opts := []remote.Option{
		remote.WithAuthFromKeychain(keys),
		remote.WithUserAgent("fluxd"),
		remote.WithTransport(capTransport{limiter}),
		// 429, 408 and 5xx are retried up to 5 times, 0.5 s, 1 s, 2 s, 4 s
		// apart, each ±50 % so that many fluxds do not retry in step.
		remote.WithRetryBackoff(remote.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 5}),
	}
	switch {
	case cfg.PageSize > 0:
		opts = append(opts, remote.WithPageSize(cfg.PageSize))
	case cfg.PageSize < 0:
		opts = append(opts, remote.WithPageSize(0))
	}
	p, err := remote.NewPuller(opts...)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, platform: *plat, opts: opts, limiter: limiter, transport: next, chain: keys, created: newMetaSet(), fetched: newRecentMetas(4096), status: map[string]*repoStatus{}, lists: map[string]*tagList{}}
	c.puller.Store(p)
	return c, nil
}

// Close releases the client's idle connections.
func (c *Client) Close() {
	if t, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// Tags lists a repository's tags, following pagination. Tags that break
// the OCI grammar are dropped (see registry.ValidTag). With ListMin set, a
// list read lately is answered without a request.
func (c *Client) Tags(ctx context.Context, repository string) ([]string, error) {
	return c.tags(ctx, repository, false)
}

// tags answers a fresh list from memory, or reads it (at once when
// force), shared by concurrent callers.
func (c *Client) tags(ctx context.Context, repository string, force bool) ([]string, error) {
	l, err := c.list(ctx, repository, force)
	if err != nil {
		return nil, err
	}
	return slices.Clone(l.tags), nil
}

// nextSeq numbers a list read as it starts; lastSeq is the last number
// given.
func (c *Client) nextSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listSeq++
	return c.listSeq
}

func (c *Client) lastSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listSeq
}

// list is tags' list with the number of the read that found it; the
// returned list is shared and must not be changed.
func (c *Client) list(ctx context.Context, repository string, force bool) (*tagList, error) {
	if c.cfg.ListMin <= 0 {
		seq := c.nextSeq()
		tags, err := c.listTags(ctx, repository)
		if err != nil {
			return nil, err
		}
		return &tagList{tags: tags, seq: seq}, nil
	}
	now := c.cfg.Now()
	c.mu.Lock()
	l, ok := c.lists[repository]
	c.mu.Unlock()
	if ok && !force && now.Before(l.next) {
		c.lookupList("hit")
		return l, nil
	}
	c.lookupList("read")
	key := repository
	if force {
		// A notification's read must start after the push it tells of:
		// joining a read already in flight (begun before the push) would
		// answer, and keep as fresh, the list without the pushed tag.
		// Forget lets this call start its own read; later ordinary
		// callers join this newer one.
		c.listing.Forget(key)
	}
	v, err, _ := c.listing.Do(key, func() (any, error) {
		seq := c.nextSeq()
		tags, err := c.listTags(ctx, repository)
		if err != nil {
			return nil, err
		}
		slices.Sort(tags)
		nl := &tagList{tags: tags, seq: seq}
		c.mu.Lock()
		defer c.mu.Unlock()
		cur, had := c.lists[repository]
		if had && cur.seq > seq {
			// A read that began later ended first: its list is newer.
			return nl, nil
		}
		if had && slices.Equal(cur.tags, tags) {
			nl.stable = cur.stable + 1
		}
		nl.next = c.cfg.Now().Add(backoff(c.cfg.ListMin, c.cfg.ListMax, nl.stable))
		c.lists[repository] = nl
		return nl, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tagList), nil
}

func (c *Client) lookupList(result string) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.lists.WithLabelValues(result).Inc()
	}
}

// listTags reads a repository's tag list from its registry.
func (c *Client) listTags(ctx context.Context, repository string) ([]string, error) {
	repo, err := name.NewRepository(repository, name.WeakValidation)
	if err != nil {
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("%q is not a valid image repository: %w", repository, err), "")
	}
	tags, err := c.pagedList(ctx, repo)
	if unauthorized(err) {
		// Credentials may have rotated, or come from a source whose
		// secret holds other credentials for this registry: read them
		// again and pass the refused source over, once.
		refused := c.chain.refuse(repo.Name())
		if c.refreshCredentials() || refused {
			c.renewPuller()
			tags, err = c.pagedList(ctx, repo)
		}
	}
	if err != nil {
		return nil, c.explain(repository, repo, err)
	}
	return c.validTags(ctx, repository, tags), nil
}

// pagedList reads a tag list page by page, within MaxTagPages pages and
// MaxTagListBytes bytes.
func (c *Client) pagedList(ctx context.Context, repo name.Repository) ([]string, error) {
	ctx = withListBudget(ctx, c.cfg.MaxTagListBytes)
	l, err := c.puller.Load().Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	for pages := 0; l.HasNext(); pages++ {
		if pages == c.cfg.MaxTagPages {
			return nil, &pagesError{c.cfg.MaxTagPages}
		}
		page, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		tags = append(tags, page.Tags...)
	}
	return tags, nil
}

// validTags drops the tags that break the OCI grammar, before anything
// reads, caches or writes them, and says so in the log.
func (c *Client) validTags(ctx context.Context, repository string, tags []string) []string {
	out := tags[:0]
	var bad []string
	for _, t := range tags {
		if registry.ValidTag(t) {
			out = append(out, t)
			continue
		}
		if len(bad) < 3 {
			if len(t) > 140 {
				t = t[:140] + "..."
			}
			bad = append(bad, strconv.Quote(t))
		}
	}
	if dropped := len(tags) - len(out); dropped > 0 {
		level := slog.LevelDebug
		if _, seen := c.warned.LoadOrStore(repository, true); !seen {
			level = slog.LevelWarn
		}
		c.cfg.Log.Log(ctx, level, "the registry lists tags that are not valid OCI tags; ignoring them",
			"component", "registry", "repository", repository, "dropped", dropped, "examples", strings.Join(bad, ", "))
	}
	return out
}

func (c *Client) lookup(result string) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.cache.WithLabelValues(result).Inc()
	}
}

// refresher is a keychain whose credentials can be re-read.
type refresher interface{ Refresh() }

// refreshCredentials makes the keychains that can re-read their sources
// do so at the next request. It reports whether any could.
func (c *Client) refreshCredentials() bool {
	refreshed := false
	for _, kc := range c.cfg.Keychains {
		if r, ok := kc.(refresher); ok {
			r.Refresh()
			refreshed = true
		}
	}
	return refreshed
}

// renewPuller starts a new puller, so that no transport keeps credentials
// that were refused or re-read.
func (c *Client) renewPuller() {
	if p, err := remote.NewPuller(c.opts...); err == nil {
		c.puller.Store(p)
	}
}

func unauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// Exists checks with one manifest HEAD that ref (repository:tag) is in its
// registry. Registries such as Docker Hub do not count a HEAD as a pull.
func (c *Client) Exists(ctx context.Context, ref string) (bool, error) {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return false, fluxerr.New(fluxerr.User, registry.BadRef(ref, err), "")
	}
	if _, err := c.puller.Load().Head(ctx, tag); err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return false, nil
		}
		return false, c.explain(tag.Context().String(), tag.Context(), err)
	}
	return true, nil
}

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

// RefreshTags reads a repository's tag list now (a notification), and
// nothing else: under version, alphabetical or numerical order the list
// is all a plan or a listing needs, and they read the tags they show.
func (c *Client) RefreshTags(ctx context.Context, repository string) ([]string, error) {
	return c.tags(ctx, repository, true)
}

// recheck is the wait before the next HEAD of a mutable tag whose digest
// was found the same stable times in a row.
func (c *Client) recheck(stable int) time.Duration {
	return backoff(c.cfg.RecheckMin, c.cfg.RecheckMax, stable)
}

// backoff is lo doubled stable times, at most hi.
func backoff(lo, hi time.Duration, stable int) time.Duration {
	d := lo
	for i := 0; i < stable && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

type repoStatus struct {
	running int
	registry.RefreshStatus
}

// Status says whether a repository is being refreshed, and how the last
// refresh went.
func (c *Client) Status(repository string) registry.RefreshStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.status[repository]; ok {
		return st.RefreshStatus
	}
	return registry.RefreshStatus{}
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

func (c *Client) begin(repository string) func(error) {
	c.mu.Lock()
	st, ok := c.status[repository]
	if !ok {
		st = &repoStatus{}
		c.status[repository] = st
	}
	if st.running == 0 {
		st.Refreshing, st.Since = true, c.cfg.Now()
	}
	st.running++
	c.mu.Unlock()
	return func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		st.running--
		st.Refreshing = st.running > 0
		if err != nil {
			st.LastError = err.Error()
		} else {
			st.LastError, st.RefreshedAt = "", c.cfg.Now()
		}
	}
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

// metaSet is what is known of images, by manifest digest; safe for
// concurrent use.
type metaSet struct {
	mu sync.Mutex
	m  map[string]registry.ImageMeta
}

func newMetaSet() *metaSet { return &metaSet{m: map[string]registry.ImageMeta{}} }

func (s *metaSet) get(digest string) (registry.ImageMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[digest]
	return m, ok
}

func (s *metaSet) put(digest string, m registry.ImageMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[digest] = m
}

// recentMetas keeps the images put lately, at most about 2×size: when
// the current generation is full it becomes the previous one, and the
// previous is dropped. Hand-rolled rather than an LRU library: it needs
// no order per entry, only a bound, and two maps give that.
type recentMetas struct {
	mu        sync.Mutex
	size      int
	cur, prev map[string]registry.ImageMeta
}

func newRecentMetas(size int) *recentMetas {
	return &recentMetas{size: size, cur: map[string]registry.ImageMeta{}}
}

func (r *recentMetas) get(digest string) (registry.ImageMeta, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.cur[digest]; ok {
		return m, true
	}
	m, ok := r.prev[digest]
	return m, ok
}

func (r *recentMetas) put(digest string, m registry.ImageMeta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cur) >= r.size {
		r.prev, r.cur = r.cur, map[string]registry.ImageMeta{}
	}
	r.cur[digest] = m
}

// meta reads an image's config (for an index, the configured platform's
// image): its digest, creation time, labels and platform.
func (c *Client) meta(desc *remote.Descriptor) (registry.ImageMeta, error) {
	var img v1.Image
	var err error
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return registry.ImageMeta{}, err
		}
		if img, err = platformImage(idx, c.platform); err != nil {
			return registry.ImageMeta{}, err
		}
	} else if img, err = desc.Image(); err != nil {
		return registry.ImageMeta{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return registry.ImageMeta{}, err
	}
	m := registry.ImageMeta{CreatedAt: cfg.Created.Time, Labels: cfg.Config.Labels}
	if d, err := img.ConfigName(); err == nil {
		m.ConfigDigest = d.String()
	}
	if cfg.OS != "" {
		p := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
		m.Platform = p.String()
	}
	if s := cfg.Config.Labels[CreatedLabel]; s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			m.CreatedAt = t
		}
	}
	return m, nil
}

func platformImage(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(want) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for platform %s in the index", want)
}

// explain turns a registry error into one that names the registry and
// says what to check. A refusal names the source of the credentials
// fluxd offered (never the credentials), or says it offered none.
func (c *Client) explain(repository string, repo name.Repository, err error) error {
	host := repo.RegistryStr()
	// Callers see the host and the status, never the registry's body.
	c.cfg.Log.Debug("registry request failed", "component", "registry", "registry", host, "repository", repository, "error", err)
	safe := &registryError{host: host, cause: cause(err), err: err}
	if errors.Is(err, errTagListTooBig) {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("reading the tags of %s: %w", repository, safe),
			fmt.Sprintf("fluxd reads at most %d pages and %d MiB of a repository's tag list, so that a registry cannot hold it with an endless list. Remove old tags from the repository, or raise the caps (--registry-max-tag-pages, --registry-max-tag-list-bytes).", c.cfg.MaxTagPages, c.cfg.MaxTagListBytes>>20))
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return c.refused(host, repository, repo, safe)
		case http.StatusNotFound:
			return fluxerr.New(fluxerr.Missing, fmt.Errorf("repository %s was not found on registry %s", repository, host),
				"Check the image name for typos; the repository may also be private to credentials fluxd does not have.")
		case http.StatusTooManyRequests:
			return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("registry %s is rate-limiting fluxd (%s)", host, safe.cause), "Wait and try again, or give fluxd credentials with a higher pull limit.")
		}
	}
	msg := err.Error()
	if strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "dial tcp") {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot reach registry %s for %s: %w", host, repository, safe),
			"This is fluxd's own request to the registry, not your connection to fluxd. Check the registry's address in the image reference, that it is up, and that fluxd's network can reach it.")
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd's request to registry %s for %s failed: %w", host, repository, safe),
		"This is fluxd's own request to the registry, not your connection to fluxd. The registry's full answer is in fluxd's log at debug level.")
}

// refused explains a 401 or 403.
func (c *Client) refused(host, repository string, repo name.Repository, err error) error {
	source, asked := c.chain.source(repo.Name())
	switch {
	case asked && source != "":
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused the credentials from %s for %s: %w", host, source, repository, err),
			"Check that these credentials are current (not a rotated password or an expired token) and that they may pull this repository. Secrets and the --registry-credentials file are read again after a refusal, so correcting them needs no restart; --docker-config is read when fluxd starts.")
	case asked:
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused access to %s, and fluxd has no credentials for it: %w", host, repository, err),
			"Give fluxd credentials for this registry: --registry-secret NAMESPACE/NAME (a dockerconfigjson Secret), --registry-credentials FILE or --docker-config; or imagePullSecrets on the workloads that run this repository's images (they serve only those images).")
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused access to %s: %w", host, repository, err),
		"Check the credentials for this registry (--registry-secret, --registry-credentials, --docker-config, or the workloads' imagePullSecrets), and that they may pull this repository.")
}
