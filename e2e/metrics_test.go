package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// documentedMetrics reads the metric names of docs/metrics.md's tables
// (the first cell of each row, fluxd_* and grpc_*).
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:fluxd|grpc)_[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("docs/metrics.md lists only %d metrics: %q", len(names), names)
	}
	return names
}

// notOnTheSharedFluxd are documented metrics the shared fluxd does not
// serve, and why.
var notOnTheSharedFluxd = map[string]string{
	"fluxd_leader":                            "registered only with --leader-elect, which the shared fluxd does not use; no test reads it yet",
	"fluxd_sync_last_timestamp_seconds":       "registered only with --sync-interval; TestSyncAppliesGit reads the sync metrics",
	"fluxd_sync_duration_seconds":             "registered only with --sync-interval",
	"fluxd_sync_failed":                       "registered only with --sync-interval; TestSyncAppliesGit reads it",
	"fluxd_sync_objects":                      "registered only with --sync-interval",
	"fluxd_sync_failed_objects":               "registered only with --sync-interval; TestSyncAppliesGit reads it",
	"fluxd_sync_kube_requests":                "registered only with --sync-interval; BenchmarkSync1000Objects reads it",
	"fluxd_notify_deliveries_total":           "labelled by receiver: the shared fluxd has none; TestNotificationsOfARelease reads it",
	"fluxd_notify_queue_depth":                "labelled by receiver: the shared fluxd has none; TestNotificationsOfARelease reads it",
	"fluxd_notify_oldest_age_seconds":         "labelled by receiver: the shared fluxd has none",
	"fluxd_registry_signature_requests_total": "signature lookups need --verify-config, which the shared fluxd does not use; TestReleaseRefusesUnsignedImages reads it",
	"fluxd_verify_results_total":              "registered only with --verify-config; TestReleaseRefusesUnsignedImages reads it",
}

// metricWith adds up the series of a metric whose labels hold every one
// of labels (`name="value"`).
func metricWith(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, l := range metricLines(t, addr) {
		rest, ok := strings.CutPrefix(l, name+"{")
		if !ok {
			continue
		}
		all := true
		for _, lb := range labels {
			all = all && strings.Contains(rest, lb)
		}
		if !all {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// Every metric docs/metrics.md lists is on a running fluxd's /metrics,
// and a call that fails is counted under its gRPC code.
func TestEveryDocumentedMetricIsServed(t *testing.T) {
	f := sharedFluxd(t)
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	// A scan, for the metrics labelled by registry host and repository,
	// and a call that fails with NotFound.
	if out, stderr, code := fluxctl(t, viewer, "list-images", "helloworld"); code != 0 {
		t.Fatalf("list-images: %s%s", out, stderr)
	}
	if _, _, code := fluxctl(t, viewer, "list-images", "no-such-service"); code == 0 {
		t.Fatal("list-images of a service that does not exist succeeded")
	}
	lines := metricLines(t, metricsAddr)
	served := map[string]bool{}
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name := l[:strings.IndexAny(l, "{ ")]
		served[name] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				served[base] = true
			}
		}
	}
	// Served → documented: every fluxd_* metric served is listed.
	documented := map[string]bool{}
	for _, name := range documentedMetrics(t) {
		documented[name] = true
	}
	for name := range served {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && served[b] {
				base = b
			}
		}
		if strings.HasPrefix(base, "fluxd_") && !documented[base] {
			t.Errorf("fluxd serves %s, which docs/metrics.md does not list", base)
		}
	}
	for _, name := range documentedMetrics(t) {
		if why, ok := notOnTheSharedFluxd[name]; ok {
			t.Logf("%s: not checked here: %s", name, why)
			continue
		}
		if !served[name] {
			t.Errorf("%s is documented in docs/metrics.md but not served by fluxd", name)
		}
	}
	notFound := -1.0
	for _, l := range lines {
		if strings.HasPrefix(l, "grpc_server_handled_total{") && strings.Contains(l, `grpc_code="NotFound"`) && strings.Contains(l, `grpc_method="ListImages"`) {
			notFound, _ = strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		}
	}
	if notFound < 1 {
		t.Errorf("the NotFound ListImages call is not counted (grpc_server_handled_total: %v)", notFound)
	}
}

// The Grafana dashboard in deploy/ uses only documented metrics.
func TestDashboardUsesDocumentedMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/fluxd-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	documented := map[string]bool{"process_resident_memory_bytes": true}
	for _, n := range documentedMetrics(t) {
		documented[n] = true
	}
	used := map[string]bool{}
	// Label names that look like metric names.
	labels := map[string]bool{"grpc_method": true, "grpc_code": true, "grpc_service": true, "grpc_type": true}
	metricName := regexp.MustCompile(`\b((?:fluxd|grpc|process)_[a-z_]+)`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if labels[m] {
					continue
				}
				base := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && documented[b] {
						base = b
					}
				}
				if !documented[base] {
					t.Errorf("panel %q uses %s, which docs/metrics.md does not list", p.Title, m)
				}
				used[base] = true
			}
		}
	}
	for n := range documented {
		if !used[n] && !strings.HasPrefix(n, "grpc_server_msg") && n != "grpc_server_started_total" {
			t.Errorf("docs/metrics.md lists %s, but no dashboard panel shows it", n)
		}
	}
}
