// Package regtest is a real OCI registry for tests and benchmarks:
// go-containerregistry's Distribution server in process, behind a handler
// that pages tag lists as Docker Hub, GHCR and Quay do (n, last and a Link
// header) and counts every request by kind.
package regtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
)

// Registry is a counting, paging registry on a loopback port.
type Registry struct {
	// Lists, Manifests, Heads, Blobs and Other count the requests of each
	// kind: tag list pages, manifest GETs, manifest HEADs, blob GETs and
	// the rest (pings, pushes).
	Lists, Manifests, Heads, Blobs, Other atomic.Int64

	srv      *httptest.Server
	next     http.Handler
	pageSize int
	// counting is off while tests push.
	counting atomic.Bool
	base     v1.Image
}

// New starts a registry whose tag lists come in pages of pageSize. Close
// it when done.
func New(pageSize int) *Registry {
	r := &Registry{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: pageSize}
	r.counting.Store(true)
	r.srv = httptest.NewServer(r)
	return r
}

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

// Host is the registry's host:port, for image references.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Requests is the count of tag list, manifest and blob requests.
func (r *Registry) Requests() int64 {
	return r.Lists.Load() + r.Manifests.Load() + r.Heads.Load() + r.Blobs.Load()
}

// Reset sets every count to zero.
func (r *Registry) Reset() {
	for _, c := range []*atomic.Int64{&r.Lists, &r.Manifests, &r.Heads, &r.Blobs, &r.Other} {
		c.Store(0)
	}
}

func (r *Registry) count(c *atomic.Int64) {
	if r.counting.Load() {
		c.Add(1)
	}
}

// ServeHTTP counts the request and pages tag lists.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/tags/list"):
		r.count(&r.Lists)
		r.list(w, req)
		return
	case strings.Contains(req.URL.Path, "/manifests/") && req.Method == http.MethodHead:
		r.count(&r.Heads)
	case strings.Contains(req.URL.Path, "/manifests/") && req.Method == http.MethodGet:
		r.count(&r.Manifests)
	case strings.Contains(req.URL.Path, "/blobs/") && req.Method == http.MethodGet:
		r.count(&r.Blobs)
	default:
		r.count(&r.Other)
	}
	r.next.ServeHTTP(w, req)
}

// list answers a page of at most pageSize tags from last, with a Link to
// the next page when there is one.
func (r *Registry) list(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	// One more than a page, to know whether a next page exists.
	q.Set("n", fmt.Sprint(r.pageSize+1))
	req.URL.RawQuery = q.Encode()
	rec := httptest.NewRecorder()
	r.next.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if len(body.Tags) > r.pageSize {
		body.Tags = body.Tags[:r.pageSize]
		w.Header().Set("Link", fmt.Sprintf(`<%s?n=%d&last=%s>; rel="next"`, req.URL.Path, r.pageSize, body.Tags[len(body.Tags)-1]))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// Version is the tag PushVersions gives the i-th image: i as a semantic
// version, 0.0.0, 0.0.1, ... 0.0.99, 0.1.0, ...
func Version(i int) string { return fmt.Sprintf("%d.%d.%d", i/10000, i/100%100, i%100) }

// PushVersions pushes images from..to-1 of repository (host/path) under
// the tags Version(i), each its own image (its own config), created a
// minute after the one before from t0, sharing one layer. Pushes are not
// counted.
func (r *Registry) PushVersions(ctx context.Context, repository string, from, to int, t0 time.Time) error {
	r.counting.Store(false)
	defer r.counting.Store(true)
	if r.base == nil {
		img, err := random.Image(64, 1)
		if err != nil {
			return err
		}
		r.base = img
	}
	pusher, err := remote.NewPusher()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := from; i < to; i++ {
		g.Go(func() error {
			img, err := mutate.CreatedAt(r.base, v1.Time{Time: t0.Add(time.Duration(i) * time.Minute)})
			if err != nil {
				return err
			}
			tag, err := name.NewTag(repository + ":" + Version(i))
			if err != nil {
				return err
			}
			return pusher.Push(ctx, tag, img)
		})
	}
	return g.Wait()
}
