package gates

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/promotion"
)

func httpCheck(u string, retries int, timeout time.Duration) promotion.Check {
	return promotion.Check{Name: "http-0", HTTP: &promotion.HTTPCheck{URL: u, Retries: retries, Timeout: timeout, Interval: 20 * time.Millisecond}}
}

// statuses answers each request with the next status, the last one
// again once they run out, and counts the requests.
func statuses(t *testing.T, codes ...int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		code := codes[min(i, len(codes)-1)]
		w.WriteHeader(code)
		if code >= 300 {
			w.Write([]byte("database: connection refused\n"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestHTTPCheck(t *testing.T) {
	g := New(nil)
	ctx := context.Background()
	st, b := promotion.Stage{Name: "staging"}, promotion.Bundle{ID: "abc"}

	t.Run("2xx passes", func(t *testing.T) {
		srv, n := statuses(t, http.StatusNoContent)
		if err := g.Run(ctx, httpCheck(srv.URL+"/healthz", 0, time.Second), st, b); err != nil {
			t.Fatalf("want a pass, got %v", err)
		}
		if n.Load() != 1 {
			t.Errorf("requests: want 1, got %d", n.Load())
		}
	})

	t.Run("500 then 200 within the retries passes", func(t *testing.T) {
		srv, n := statuses(t, 500, 500, 200)
		if err := g.Run(ctx, httpCheck(srv.URL, 2, time.Second), st, b); err != nil {
			t.Fatalf("want a pass on the third try, got %v", err)
		}
		if n.Load() != 3 {
			t.Errorf("requests: want 3, got %d", n.Load())
		}
	})

	t.Run("never 2xx fails with the last status", func(t *testing.T) {
		srv, n := statuses(t, 500, 502, 503)
		err := g.Run(ctx, httpCheck(srv.URL+"/healthz", 2, time.Second), st, b)
		if err == nil {
			t.Fatal("want a failure, got a pass")
		}
		for _, want := range []string{"GET " + srv.URL + "/healthz", "3 tries", "503 Service Unavailable", "database: connection refused"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the failure %q does not say %q", err, want)
			}
		}
		if n.Load() != 3 {
			t.Errorf("requests: want 3 (1 + 2 retries), got %d", n.Load())
		}
	})

	t.Run("500 then 200 after the retries ran out fails", func(t *testing.T) {
		srv, n := statuses(t, 500, 500, 200)
		err := g.Run(ctx, httpCheck(srv.URL, 1, time.Second), st, b)
		if err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") {
			t.Fatalf("want a failure saying 500, got %v", err)
		}
		if n.Load() != 2 {
			t.Errorf("requests: want 2, got %d", n.Load())
		}
	})

	t.Run("no answer within the timeout fails", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		start := time.Now()
		err := g.Run(ctx, httpCheck(srv.URL, 1, 100*time.Millisecond), st, b)
		if err == nil || !strings.Contains(err.Error(), "had no answer within 100ms") {
			t.Fatalf("want a failure saying the timeout, got %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("two tries of 100ms took %s", d)
		}
	})

	t.Run("nothing listening fails with the error", func(t *testing.T) {
		srv, _ := statuses(t, 200)
		srv.Close()
		err := g.Run(ctx, httpCheck(srv.URL, 0, time.Second), st, b)
		if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "no retries") {
			t.Fatalf("want a failure saying connection refused, got %v", err)
		}
	})

	t.Run("credentials and query strings are never shown", func(t *testing.T) {
		srv, _ := statuses(t, 401)
		u := strings.Replace(srv.URL, "http://", "http://ci:s3cret-pass@", 1) + "/healthz?token=t0ken-value"
		err := g.Run(ctx, httpCheck(u, 0, time.Second), st, b)
		if err == nil {
			t.Fatal("want a failure")
		}
		srv.Close()
		err2 := g.Run(ctx, httpCheck(u, 0, time.Second), st, b)
		for _, e := range []error{err, err2} {
			if e == nil || strings.Contains(e.Error(), "s3cret-pass") || strings.Contains(e.Error(), "t0ken-value") {
				t.Errorf("the failure shows a credential: %v", e)
			}
		}
	})

	t.Run("a URL's credentials are sent as basic auth", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}))
		t.Cleanup(srv.Close)
		u := strings.Replace(srv.URL, "http://", "http://ci:s3cret@", 1)
		if err := g.Run(ctx, httpCheck(u, 0, time.Second), st, b); err != nil {
			t.Fatalf("want a pass with the URL's credentials, got %v", err)
		}
		if err := g.Run(ctx, httpCheck(srv.URL, 0, time.Second), st, b); err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("want a 401 without them, got %v", err)
		}
	})

	t.Run("a cancelled context stops the retries", func(t *testing.T) {
		srv, n := statuses(t, 500)
		ctx, cancel := context.WithCancel(ctx)
		c := httpCheck(srv.URL, 100, time.Second)
		c.HTTP.Interval = time.Hour
		time.AfterFunc(100*time.Millisecond, cancel)
		err := g.Run(ctx, c, st, b)
		if err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("want a failure saying it was stopped, got %v", err)
		}
		if n.Load() != 1 {
			t.Errorf("requests: want 1, got %d", n.Load())
		}
	})
}

func TestRunRefusesACheckOfNoKind(t *testing.T) {
	err := New(nil).Run(context.Background(), promotion.Check{Name: "x"}, promotion.Stage{}, promotion.Bundle{})
	if err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Fatalf("want a refusal, got %v", err)
	}
}
