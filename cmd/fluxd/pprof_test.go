package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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

// The command line is not served: a --git-url may carry credentials
// (https://user:TOKEN@host/repo), and the metrics listener asks for none.
// (Not parallel: it sets os.Args.)
func TestPprofDoesNotServeTheCommandLine(t *testing.T) {
	saved := os.Args
	defer func() { os.Args = saved }()
	os.Args = []string{"fluxd", "--git-url=https://fluxd:s3cr3t-token@git.example.com/org/repo"}
	mux := http.NewServeMux()
	servePprof(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/cmdline?debug=1", "/debug/pprof/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "s3cr3t-token") {
			t.Errorf("GET %s serves the command line, credentials and all: %q", path, body)
		}
	}
}
