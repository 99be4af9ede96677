package oci

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// pingCache answers the registry's version check, GET /v2/, from its
// last answer for a while. go-containerregistry makes that check before
// every repository it reads (to learn the registry's auth challenge, and
// for a registry it may reach over plain HTTP, whether it speaks TLS, by
// trying both), so a pass over 1,000 repositories of one registry made
// 2,000 checks beside its 1,000 tag lists, and waited for them under the
// per-host rate limit: the automator's first pass at 10,000 workloads
// spent two thirds of its 30 s there. The library has no cache of its
// own for it, nor a way to hand it a check already made other than
// skipping its auth handshake altogether (transport.Wrapper), so the
// answer is kept here, below its retries and above the rate limit.
//
// Kept: a 200 or 401 answer (what the check reads: the status and the
// WWW-Authenticate challenge), for pingTTL; checks of one URL at once
// share one request. And for a host whose plain
// HTTP check is kept, that its HTTPS check failed: the next HTTPS check
// fails at once, so the library falls back to the kept HTTP answer
// without a request. Anything else (an error, a 5xx) is not kept.
type pingCache struct {
	next http.RoundTripper
	ttl  time.Duration
	now  func() time.Time

	inflight singleflight.Group
	mu       sync.Mutex
	answers  map[string]pingAnswer // by scheme://host
	noTLS    map[string]time.Time  // host: when its HTTPS check failed
}

// pingTTL is how long a check's answer is kept: short enough that a
// registry that changes its auth is seen again within a pass or two,
// long enough that one pass over many repositories checks once.
const pingTTL = time.Minute

// maxPingBody bounds the body of a kept answer (registries send "{}" or
// a short error).
const maxPingBody = 4 << 10

// maxSharedPingBody bounds what of an answer not kept (another status,
// or a longer body) is read to hand to every check that shared it: the
// check reads the status and headers only.
const maxSharedPingBody = 64 << 10

type pingAnswer struct {
	status int
	proto  string
	header http.Header
	body   []byte
	at     time.Time
}

func newPingCache(next http.RoundTripper) *pingCache {
	return &pingCache{next: next, ttl: pingTTL, now: time.Now, answers: map[string]pingAnswer{}, noTLS: map[string]time.Time{}}
}

// errNoTLS is the failure of an HTTPS check of a host whose HTTPS check
// failed a moment ago and whose plain HTTP check answered.
var errNoTLS = errors.New("this registry host failed its HTTPS check a moment ago and answers plain HTTP (kept by fluxd)")

func isPing(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Path == "/v2/" && req.URL.RawQuery == "" && req.Header.Get("Authorization") == ""
}

func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isPing(req) {
		return p.next.RoundTrip(req)
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	now := p.now()
	p.mu.Lock()
	a, ok := p.answers[key]
	fresh := ok && now.Sub(a.at) < p.ttl
	var skipTLS bool
	if req.URL.Scheme == "https" {
		plain, plainOK := p.answers["http://"+req.URL.Host]
		failed, failedOK := p.noTLS[req.URL.Host]
		skipTLS = !fresh && plainOK && now.Sub(plain.at) < p.ttl && failedOK && now.Sub(failed) < p.ttl
	}
	p.mu.Unlock()
	switch {
	case fresh:
		return a.response(req), nil
	case skipTLS:
		return nil, errNoTLS
	}
	// Checks of one URL at once (a plan reads 8 repositories at once)
	// share one request.
	v, err, _ := p.inflight.Do(key, func() (any, error) {
		resp, err := p.next.RoundTrip(req)
		if err != nil {
			if req.URL.Scheme == "https" && req.Context().Err() == nil {
				p.mu.Lock()
				p.noTLS[req.URL.Host] = now
				p.mu.Unlock()
			}
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxSharedPingBody))
		if err != nil {
			return nil, err
		}
		a := pingAnswer{status: resp.StatusCode, proto: resp.Proto, header: resp.Header.Clone(), body: body, at: now}
		if (a.status == http.StatusOK || a.status == http.StatusUnauthorized) && len(body) <= maxPingBody {
			p.mu.Lock()
			p.answers[key] = a
			if req.URL.Scheme == "https" {
				delete(p.noTLS, req.URL.Host)
			}
			p.mu.Unlock()
		}
		return a, nil
	})
	if err != nil && req.Context().Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The request shared was another caller's, which left: this
		// one checks for itself.
		return p.next.RoundTrip(req)
	}
	if err != nil {
		return nil, err
	}
	return v.(pingAnswer).response(req), nil
}

// forget drops every kept answer: credentials changed, and the registry
// may challenge differently.
func (p *pingCache) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.answers)
	clear(p.noTLS)
}

// response is a fresh response to req from a kept answer.
func (a pingAnswer) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        http.StatusText(a.status),
		StatusCode:    a.status,
		Proto:         a.proto,
		ProtoMajor:    1,
		Header:        a.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
	}
}

// CloseIdleConnections passes on to the transport below.
func (p *pingCache) CloseIdleConnections() {
	if c, ok := p.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
