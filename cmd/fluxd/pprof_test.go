package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPprofNeedsTheMetricsListener(t *testing.T) {
	t.Parallel()
	err := validatePprof(flags{pprof: true})
	if err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("--pprof without --metrics-listen: %v, want an error naming --metrics-listen", err)
	}
	if err := validatePprof(flags{pprof: true, metricsListen: "127.0.0.1:0"}); err != nil {
		t.Errorf("--pprof with --metrics-listen: %v", err)
	}
}

// The profiles go tool pprof reads are served: a heap profile (gzipped
// protobuf) and the index.
func TestPprofServesProfiles(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	servePprof(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/allocs", "/debug/pprof/heap"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %s, %d bytes", path, resp.Status, len(body))
		}
	}
}
