package oci

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Reading the tags of many repositories of one registry checks its
// version (GET /v2/) once, not once per repository: go-containerregistry
// checks before each, and the checks waited under the per-host rate limit
// beside the lists (the automator's first pass at 10,000 workloads). A
// registry that wants credentials is checked again after they change,
// and its challenge is what the library reads from the kept answer.
func TestTagsOfManyRepositoriesCheckTheRegistryOnce(t *testing.T) {
	for _, private := range []bool{false, true} {
		t.Run(fmt.Sprintf("private=%v", private), func(t *testing.T) {
			var pings, lists atomic.Int64
			host := authRegistry(t, private, func(r *http.Request) {
				if r.URL.Path == "/v2/" {
					pings.Add(1)
				}
				if strings.HasSuffix(r.URL.Path, "/tags/list") {
					lists.Add(1)
				}
			})
			img, err := random.Image(64, 1)
			if err != nil {
				t.Fatal(err)
			}
			const repos = 12
			for i := range repos {
				tag, _ := name.NewTag(fmt.Sprintf("%s/app-%d:1.0.%d", host, i, i))
				if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: "puller", Password: "pw"})); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{}
			if private {
				cfg.DockerConfig = filepath.Join(t.TempDir(), "config.json")
				if err := os.WriteFile(cfg.DockerConfig, dockerConfig(host, "puller", "pw"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			pings.Store(0)
			for i := range repos {
				tags, err := c.Tags(context.Background(), fmt.Sprintf("%s/app-%d", host, i))
				if err != nil || len(tags) != 1 || tags[0] != fmt.Sprintf("1.0.%d", i) {
					t.Fatalf("app-%d: %v %v", i, tags, err)
				}
			}
			if n := pings.Load(); n != 1 {
				t.Errorf("%d repositories read with %d version checks; want 1", repos, n)
			}
			if n := lists.Load(); n != repos {
				t.Errorf("%d tag list requests; want %d", n, repos)
			}
			// Credentials renewed: the registry is checked again.
			c.renewPuller()
			if _, err := c.tags(context.Background(), host+"/app-0", true); err != nil {
				t.Fatal(err)
			}
			if n := pings.Load(); n != 2 {
				t.Errorf("after new credentials, %d version checks in all; want 2", n)
			}
		})
	}
}

// A kept check is used for its TTL only.
func TestPingCacheExpires(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://auth.example/token",service="reg"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPingCache(http.DefaultTransport)
	p.now = func() time.Time { return now }
	check := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v2/", nil)
		resp, err := p.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 3 {
		if r := check(); r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), "auth.example") {
			t.Fatalf("kept answer: %d %v", r.StatusCode, r.Header)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("%d checks reached the registry within the TTL; want 1", hits.Load())
	}
	now = now.Add(pingTTL)
	check()
	if hits.Load() != 2 {
		t.Errorf("%d checks reached the registry after the TTL; want 2", hits.Load())
	}
	// Only the check is kept: other requests always pass.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v2/app/tags/list", nil)
	resp, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 3 {
		t.Errorf("a tag list did not reach the registry")
	}
}
