package oci

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pager pages tag lists the way Docker Hub, GHCR and Quay do (n, last and
// a Link header), in front of the in-process registry, which sends no
// Link header, and counts requests by kind.
type pager struct {
	next     http.Handler
	pageSize int
	lists    atomic.Int64
	manifest atomic.Int64
	heads    atomic.Int64
	blobs    atomic.Int64
	other    atomic.Int64
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/tags/list"):
		p.lists.Add(1)
		q := r.URL.Query()
		// Ask for one more than a page, to know whether a next page
		// exists (the in-process registry restarts from the first tag
		// when last is the final one).
		q.Set("n", fmt.Sprint(p.pageSize+1))
		r.URL.RawQuery = q.Encode()
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r)
		var body struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(body.Tags) > p.pageSize {
			body.Tags = body.Tags[:p.pageSize]
			w.Header().Set("Link", fmt.Sprintf(`<%s?n=%d&last=%s>; rel="next"`, r.URL.Path, p.pageSize, body.Tags[len(body.Tags)-1]))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
		return
	case strings.Contains(r.URL.Path, "/manifests/") && r.Method == http.MethodHead:
		p.heads.Add(1)
	case strings.Contains(r.URL.Path, "/manifests/"):
		p.manifest.Add(1)
	case strings.Contains(r.URL.Path, "/blobs/"):
		p.blobs.Add(1)
	default:
		p.other.Add(1)
	}
	p.next.ServeHTTP(w, r)
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

func imageAt(t *testing.T, created time.Time, labels map[string]string) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// privateRegistry serves an in-process registry that wants basic auth as
// puller:pw, with one image, private:1.0, and returns its host.
func privateRegistry(t *testing.T) string {
	t.Helper()
	host := authRegistry(t, true, nil)
	tag, _ := name.NewTag(host + "/private:1.0")
	if err := remote.Write(tag, imageAt(t, time.Now(), nil), remote.WithAuth(&authn.Basic{Username: "puller", Password: "pw"})); err != nil {
		t.Fatal(err)
	}
	return host
}

// authRegistry serves an in-process registry, which wants basic auth as
// puller:pw when private, shows seen each request first,
// and returns its host. It stops when the test ends.
func authRegistry(t *testing.T, private bool, seen func(*http.Request)) string {
	t.Helper()
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r)
		}
		if u, p, ok := r.BasicAuth(); private && (!ok || u != "puller" || p != "pw") {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (p *pager) reset() {
	p.lists.Store(0)
	p.manifest.Store(0)
	p.heads.Store(0)
	p.blobs.Store(0)
}

func (p *pager) counts() string {
	return fmt.Sprintf("lists %d, manifest GETs %d, HEADs %d, blobs %d", p.lists.Load(), p.manifest.Load(), p.heads.Load(), p.blobs.Load())
}
