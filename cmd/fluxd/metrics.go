package main

import (
	"regexp"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fluxd/fluxd/internal/version"
)

// newMetricsRegistry is the registry every component reports to, with
// the Go runtime's, the process's and fluxd's build metrics.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// With the default Go metrics, the collector's CPU and the soft
	// memory limit (--memory-limit-ratio): what a limit costs.
	goRuntime := collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
		Matcher: regexp.MustCompile(`^/cpu/classes/gc/total:cpu-seconds$|^/gc/gomemlimit:bytes$`)})
	reg.MustRegister(collectors.NewGoCollector(goRuntime), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	return reg
}

// buildInfo is fluxd_build_info{version,revision,go_version}, always 1: which
// build a replica runs, for dashboards and alerts across a rollout.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fluxd_build_info", Help: "fluxd's build: its version, source revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": version.String(), "revision": revision, "go_version": runtime.Version()}})
	g.Set(1)
	return g
}
