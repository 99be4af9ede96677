package oci

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// A storm of 429s: fluxd halves its rate, honours Retry-After, still gets
// the images, and recovers its rate afterwards.
func TestTooManyRequestsBacksOffAndRecovers(t *testing.T) {
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var storm atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") && storm.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"toomanyrequests: You have reached your pull rate limit."}]}`)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/app:1.0.0", imageAt(t, time.Now(), nil))
	storm.Store(3)

	c, err := New(Config{Concurrency: 1, Rate: RateConfig{Rate: 40, Burst: 5, Floor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	imgs, err := c.Images(context.Background(), host+"/app")
	if err != nil || len(imgs) != 1 {
		t.Fatalf("after a 429 storm: %v, %v", imgs, err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("Retry-After: 1 was not honoured (the scan took %v)", waited)
	}
	if r := c.limiter.Rate(host); r > 10 {
		t.Errorf("rate after 3 throttled answers = %.1f/s, want it halved three times from 40", r)
	}
	low := c.limiter.Rate(host)
	for i := 0; i < 20; i++ {
		if _, err := c.Tags(context.Background(), host+"/app"); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.limiter.Rate(host); r <= low {
		t.Errorf("rate did not recover: %.1f/s after successes, was %.1f/s", r, low)
	}
	// Another host keeps its own rate.
	if r := c.limiter.Rate("other.example"); r != 40 {
		t.Errorf("another host's rate = %.1f, want 40", r)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "Mon, 30 Nov 2026 12:00:30 GMT": 30 * time.Second, "soon": 0,
	} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestServerErrorsAreRetried(t *testing.T) {
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var failures atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") && failures.Add(-1) >= 0 {
			http.Error(w, "upstream timeout", http.StatusGatewayTimeout)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/app:1.0.0", imageAt(t, time.Now(), nil))
	failures.Store(2)
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := c.Tags(context.Background(), host+"/app")
	if err != nil || len(tags) != 1 {
		t.Fatalf("after two 504s: %v, %v", tags, err)
	}
	// A registry that keeps failing gives up with an error naming it.
	failures.Store(100)
	if _, err := c.Tags(context.Background(), host+"/app"); err == nil || !strings.Contains(err.Error(), host) {
		t.Fatalf("a registry that keeps failing: %v", err)
	}
}
