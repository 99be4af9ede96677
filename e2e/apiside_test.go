package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The side-by-side run of BenchmarkAPILoad: the kube-apiserver's cached
// LIST of the same Deployments (resourceVersion=0: served from its watch
// cache, no etcd read) against fluxd's JSON API ListServices, both through
// vegeta with the same 50 workers and HTTP/1.1 connections, neither body
// decoded (vegeta reads each body to its end and keeps none of it).

// apiWorkers is the load's concurrency, the same for every side.
const apiWorkers = 50

// apiDuration is how long each side is loaded: BENCH_API_DURATION (a Go
// duration), 20s by default.
func apiDuration(b *testing.B) time.Duration {
	if v := os.Getenv("BENCH_API_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("BENCH_API_DURATION=%q is not a positive Go duration (20s, 1m)", v)
		}
		return d
	}
	return 20 * time.Second
}

// sideResult is one side's numbers.
type sideResult struct {
	name          string
	rps           float64 // successful answers a second
	p50, p99      float64 // milliseconds
	requests      uint64
	success       float64 // 0..1
	bytesPerReply float64
	errors        []string
}

func (r sideResult) String() string {
	s := fmt.Sprintf("%-44s %7.1f req/s  p50 %7.1f ms  p99 %7.1f ms  %6d requests  %5.1f%% ok",
		r.name, r.rps, r.p50, r.p99, r.requests, r.success*100)
	if r.bytesPerReply > 0 {
		s += fmt.Sprintf("  %.0f KB/answer", r.bytesPerReply/1024)
	}
	if len(r.errors) > 0 {
		s += "  errors: " + strings.Join(r.errors[:min(3, len(r.errors))], "; ")
	}
	return s
}

// vegetaLoad sends target as fast as apiWorkers workers can for d.
func vegetaLoad(b *testing.B, name string, target vegeta.Target, tlsConfig *tls.Config, d time.Duration) sideResult {
	b.Helper()
	opts := []func(*vegeta.Attacker){
		vegeta.Workers(apiWorkers), vegeta.MaxWorkers(apiWorkers),
		vegeta.Connections(apiWorkers), vegeta.MaxConnections(apiWorkers),
		vegeta.HTTP2(false), vegeta.KeepAlive(true),
		vegeta.MaxBody(0), vegeta.Timeout(60 * time.Second),
	}
	if tlsConfig != nil {
		opts = append(opts, vegeta.TLSConfig(tlsConfig))
	}
	atk := vegeta.NewAttacker(opts...)
	var m vegeta.Metrics
	// Rate 0: no pacing, each worker sends its next request when its last
	// is answered.
	for res := range atk.Attack(vegeta.NewStaticTargeter(target), vegeta.Rate{}, d, name) {
		m.Add(res)
	}
	m.Close()
	// vegeta reads every body to its end but, with MaxBody(0), counts
	// none of it: answer sizes are not reported for these sides.
	return sideResult{name: name, rps: m.Throughput, p50: ms(m.Latencies.P50), p99: ms(m.Latencies.P99),
		requests: m.Requests, success: m.Success, errors: m.Errors}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// apiServerList is the kube-apiserver's cached LIST of the Deployments of
// namespace, as the stack's admin.
func apiServerList(b *testing.B, namespace string) (vegeta.Target, *tls.Config) {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"Accept": {"application/json"}}
	if cfg.BearerToken != "" {
		h.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	return vegeta.Target{Method: http.MethodGet, Header: h,
		URL: strings.TrimSuffix(cfg.Host, "/") + "/apis/apps/v1/namespaces/" + namespace + "/deployments?resourceVersion=0"}, tlsConfig
}

// fluxdJSONList is fluxd's JSON API ListServices of namespace.
func fluxdJSONList(webAddr, token, namespace string) vegeta.Target {
	return vegeta.Target{Method: http.MethodPost, URL: "http://" + webAddr + "/api/fluxd.v1.FluxService/ListServices",
		Header: http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"namespace":` + strconv.Quote(namespace) + `}`)}
}
