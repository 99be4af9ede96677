package oci

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxd/fluxd/registry"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/singleflight"
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
	// Lists, if set (and ListMin above zero), keeps the tag lists read
	// across restarts: a list whose next read is not due yet is answered
	// from it, so a restarted fluxd does not list every repository again
	// before its first automator pass. A store that fails or does not
	// answer within ListStoreTimeout costs a read, never a wrong list.
	Lists ListStore
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
	pings     *pingCache
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
	// saving counts the writers of lists to Lists (at most one runs);
	// toSave are the lists queued for it, writing whether it runs, and
	// closed whether Close was called (nothing is queued after).
	saving  sync.WaitGroup
	saveMu  sync.Mutex
	toSave  map[string]registry.TagList
	writing bool
	closed  bool
	// storeWarned is when a failing list store was last warned of.
	storeWarned atomic.Int64
	// storeDownUntil is when a list store that failed is asked again
	// (Unix nanoseconds).
	storeDownUntil atomic.Int64
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
	pings := newPingCache(limiter)
	opts := []remote.Option{
		remote.WithAuthFromKeychain(keys),
		remote.WithUserAgent("fluxd"),
		remote.WithTransport(capTransport{pings}),
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
	c := &Client{cfg: cfg, platform: *plat, opts: opts, limiter: limiter, pings: pings, transport: next, chain: keys, created: newMetaSet(), fetched: newRecentMetas(4096), status: map[string]*repoStatus{}, lists: map[string]*tagList{}}
	c.puller.Store(p)
	return c, nil
}

// Close releases the client's idle connections, after the lists being
// saved are written.
func (c *Client) Close() {
	c.saveMu.Lock()
	c.closed = true
	c.saveMu.Unlock()
	c.saving.Wait()
	if t, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}
