package oci

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxd/fluxd/history/sqlite"
)

func TestMetrics(t *testing.T) {
	p := &pager{next: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), pageSize: 100}
	srv := httptest.NewServer(p)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/app:1.0.0", imageAt(t, time.Now(), nil))
	push(t, host+"/app:latest", imageAt(t, time.Now(), nil))
	reg := prometheus.NewRegistry()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now()
	c, err := New(Config{Metrics: NewMetrics(reg), Cache: store, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Images(context.Background(), host+"/app"); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour) // latest is due for its re-check
	}
	m := c.cfg.Metrics
	if got := testutil.ToFloat64(m.requests.WithLabelValues(host, "GET", "200")); got < 3 {
		t.Errorf("GET 200 requests = %v, want at least the list, 2 manifests and configs", got)
	}
	for result, want := range map[string]float64{"miss": 2, "hit": 1, "checked": 1} {
		if got := testutil.ToFloat64(m.cache.WithLabelValues(result)); got != want {
			t.Errorf("cache %s = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(m.tags.WithLabelValues(host + "/app")); got != 2 {
		t.Errorf("tags gauge = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.rate.WithLabelValues(host)); got != 100 {
		t.Errorf("rate gauge = %v, want the default 100", got)
	}
	if n := testutil.CollectAndCount(m.scan); n != 1 {
		t.Errorf("scan histogram series = %d, want 1", n)
	}
}

// TestSignatureRequestsCounted: a signature lookup through
// SignatureTransport is counted as a registry request and as a signature
// request; the client's own reads only as the first.
func TestSignatureRequestsCounted(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/app:1.0.0", imageAt(t, time.Now(), nil))
	c, err := New(Config{Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Images(context.Background(), host+"/app"); err != nil {
		t.Fatal(err)
	}
	m := c.cfg.Metrics
	reads := testutil.ToFloat64(m.requests.WithLabelValues(host, "GET", "200"))
	if got := testutil.ToFloat64(m.sigs.WithLabelValues(host, "GET", "200")); reads == 0 || got != 0 {
		t.Fatalf("after a scan: %v requests, %v signature requests; want some, and none", reads, got)
	}
	// What verify/cosign asks for an unsigned image: the .sig tag.
	req := httptest.NewRequest("GET", srv.URL+"/v2/app/manifests/sha256-0000.sig", nil)
	req.RequestURI = ""
	resp, err := c.SignatureTransport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := testutil.ToFloat64(m.sigs.WithLabelValues(host, "GET", "404")); got != 1 {
		t.Errorf("signature requests GET 404 = %v; want 1", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues(host, "GET", "404")); got != 1 {
		t.Errorf("requests GET 404 = %v; want 1, the signature lookup counted with the rest", got)
	}
}
