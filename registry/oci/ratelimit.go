package oci

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateConfig bounds fluxd's requests to each registry host.
type RateConfig struct {
	// Rate is the steady request rate per host, per second; default 100.
	Rate float64
	// Burst is how many requests may go at once above the rate; default 20.
	Burst int
	// Floor is the lowest rate back-off goes to; default 0.5.
	Floor float64
	// MaxRetryAfter bounds how long a Retry-After header makes fluxd wait;
	// default 60s.
	MaxRetryAfter time.Duration
}

func (c *RateConfig) defaults() {
	if c.Rate <= 0 {
		c.Rate = 100
	}
	if c.Burst <= 0 {
		c.Burst = 20
	}
	if c.Floor <= 0 {
		c.Floor = 0.5
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = time.Minute
	}
}

// rateLimiter is an http.RoundTripper that keeps a token bucket per
// registry host. A 429 (Docker Hub's "toomanyrequests" included) halves
// that host's rate, down to the floor, and is held for its Retry-After;
// each success raises the rate by 5 %, back up to the configured rate. One
// host being throttled never slows another. Retrying 429s, 5xx and
// timeouts is left to go-containerregistry's retrying transport, above
// this one, with the jittered back-off set in New.
type rateLimiter struct {
	next    http.RoundTripper
	cfg     RateConfig
	metrics *Metrics // may be nil

	mu    sync.Mutex
	hosts map[string]*rate.Limiter
}

func newRateLimiter(next http.RoundTripper, cfg RateConfig, m *Metrics) *rateLimiter {
	cfg.defaults()
	return &rateLimiter{next: next, cfg: cfg, metrics: m, hosts: map[string]*rate.Limiter{}}
}

func (l *rateLimiter) limiter(host string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.hosts[host]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
		l.hosts[host] = lim
	}
	return lim
}

// Rate reports the current rate for host, for metrics and tests.
func (l *rateLimiter) Rate(host string) float64 { return float64(l.limiter(host).Limit()) }

func (l *rateLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	lim := l.limiter(req.URL.Host)
	if err := lim.Wait(req.Context()); err != nil {
		return nil, err
	}
	resp, err := l.next.RoundTrip(req)
	if l.metrics != nil {
		status := "error"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		l.metrics.requests.WithLabelValues(req.URL.Host, req.Method, status).Inc()
		defer func() { l.metrics.rate.WithLabelValues(req.URL.Host).Set(float64(lim.Limit())) }()
	}
	if err != nil {
		return nil, err
	}
	cur := float64(lim.Limit())
	if resp.StatusCode != http.StatusTooManyRequests {
		if cur < l.cfg.Rate {
			lim.SetLimit(rate.Limit(min(cur*1.05, l.cfg.Rate)))
		}
		return resp, nil
	}
	lim.SetLimit(rate.Limit(max(cur/2, l.cfg.Floor)))
	// Hold the answer for Retry-After, so that the retrying transport
	// above (go-containerregistry's, with jittered back-off) asks again no
	// sooner than the registry allows.
	if wait := retryAfter(resp.Header.Get("Retry-After"), time.Now()); wait > 0 {
		t := time.NewTimer(min(wait, l.cfg.MaxRetryAfter))
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
		}
	}
	return resp, nil
}

// retryAfter parses a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return t.Sub(now)
	}
	return 0
}
