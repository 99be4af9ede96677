package main

import (
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestMetricsShowMemoryLimit: an operator sees the soft memory limit
// fluxd set (--memory-limit-ratio) and what the collector costs.
func TestMetricsShowMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(483183820))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(newMetricsRegistry(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	page := rec.Body.String()
	for _, want := range []string{"go_gc_gomemlimit_bytes 4.8318382e+08", "go_cpu_classes_gc_total_cpu_seconds_total "} {
		if !strings.Contains(page, want) {
			t.Errorf("the metrics page has no %q", want)
		}
	}
}
