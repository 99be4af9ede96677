package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fluxd/fluxd/promotion"
)

// startPrometheus runs the real Prometheus server (Debian's prometheus
// package; make deps installs it) on loopback, scraping a workload's
// metrics endpoint every second, and returns its base URL once the
// workload's series are queryable.
func startPrometheus(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("the prometheus binary is not on PATH: run make deps (it installs Debian's prometheus package)")
	}

	// The workload: a few series whose values the checks compare.
	reg := prometheus.NewRegistry()
	ok := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gate_ok", Help: "1 when the workload is healthy."})
	ok.Set(1)
	ratio := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gate_error_ratio", Help: "Errors per request."}, []string{"route"})
	ratio.WithLabelValues("/a").Set(0.01)
	ratio.WithLabelValues("/b").Set(0.2)
	ratio.WithLabelValues("/c").Set(0.02)
	reg.MustRegister(ok, ratio)
	workload := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(workload.Close)

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: workload
  static_configs: [{targets: [%q]}]
`, strings.TrimPrefix(workload.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base := "http://" + addr
	// Ready once the workload's three ratio series were scraped.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if n, err := seriesCount(base, "gate_error_ratio"); err == nil && n == 3 {
			return base
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("Prometheus did not scrape the workload within 60s; its log:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// seriesCount asks Prometheus's HTTP API directly (not through the code
// under test) how many series a query returns.
func seriesCount(base, query string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + query)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	return len(r.Data.Result), nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestPrometheusCheckOnARealServer(t *testing.T) {
	base := startPrometheus(t)
	g := New(nil)
	ctx := context.Background()
	check := func(u, query, op string, threshold float64) error {
		c := promotion.Check{Name: "prometheus-0", Prometheus: &promotion.PrometheusCheck{URL: u, Query: query, Op: op, Threshold: threshold, Timeout: 5 * time.Second}}
		return g.Run(ctx, c, promotion.Stage{Name: "staging"}, promotion.Bundle{ID: "abc"})
	}
	for _, tc := range []struct {
		name, query, op string
		threshold       float64
		url             string   // default: the server
		fails           []string // what the failure says; none: it passes
		not             []string // what it must not say
	}{
		{name: "one sample passes", query: "gate_ok", op: "==", threshold: 1},
		{name: "one sample fails", query: "gate_ok", op: "<", threshold: 1,
			fails: []string{`query "gate_ok"`, `gate_ok{instance="`, "= 1, not < 1"}},
		{name: "a scalar passes", query: "scalar(sum(gate_error_ratio))", op: ">=", threshold: 0.23},
		{name: "a scalar fails", query: "scalar(sum(gate_error_ratio))", op: "<", threshold: 0.1, fails: []string{"is 0.23", "not < 0.1"}},
		{name: "every series passes", query: "gate_error_ratio", op: "<", threshold: 0.5},
		{name: "one series of several fails and is named", query: "gate_error_ratio", op: "<", threshold: 0.1,
			fails: []string{"1 of 3 series are not < 0.1", `route="/b"`, "= 0.2"}, not: []string{`route="/a"`, `route="/c"`}},
		{name: "no data is not healthy", query: `gate_error_ratio{route="/nowhere"}`, op: "<", threshold: 0.1,
			fails: []string{"no data"}},
		{name: "NaN fails", query: "gate_ok / (gate_ok - 1) * 0", op: "!=", threshold: 7,
			fails: []string{"NaN"}},
		{name: "a range vector is refused", query: "gate_ok[1m]", op: "==", threshold: 1,
			fails: []string{"range vector", "rate("}},
		{name: "bad PromQL is refused with Prometheus's reason", query: "sum(gate_ok", op: "==", threshold: 1,
			fails: []string{"refused the query", "valid PromQL"}},
		{name: "nothing listening", url: "http://" + freeAddr(t), query: "gate_ok", op: "==", threshold: 1,
			fails: []string{"connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if u == "" {
				u = base
			}
			err := check(u, tc.query, tc.op, tc.threshold)
			t.Logf("%s: %v", tc.name, err)
			if len(tc.fails) == 0 {
				if err != nil {
					t.Fatalf("want a pass, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want a failure, got a pass")
			}
			for _, want := range tc.fails {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the failure %q does not say %q", err, want)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(err.Error(), not) {
					t.Errorf("the failure %q says %q", err, not)
				}
			}
		})
	}
}

func TestPrometheusCheckOnAServerThatIsNotPrometheus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>Not Found</html>", http.StatusNotFound)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://admin:pr0m-secret@", 1)
	c := promotion.Check{Prometheus: &promotion.PrometheusCheck{URL: u, Query: "up", Op: "==", Threshold: 1}}
	err := New(nil).Run(context.Background(), c, promotion.Stage{}, promotion.Bundle{})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "is it Prometheus?") {
		t.Fatalf("want a failure saying 404 and asking whether it is Prometheus, got %v", err)
	}
	if strings.Contains(err.Error(), "pr0m-secret") {
		t.Errorf("the failure shows the password: %v", err)
	}
}
