package oci

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the registry client's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	sigs     *prometheus.CounterVec
	cache    *prometheus.CounterVec
	lists    *prometheus.CounterVec
	scan     *prometheus.HistogramVec
	tags     *prometheus.GaugeVec
	rate     *prometheus.GaugeVec
}

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxd_registry_requests_total",
			Help: "Requests sent to registries, by host, method and HTTP status.",
		}, []string{"host", "method", "status"}),
		sigs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxd_registry_signature_requests_total",
			Help: "Of the requests sent to registries, those that looked up image signatures (and attestations), by host, method and HTTP status.",
		}, []string{"host", "method", "status"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxd_registry_cache_lookups_total",
			Help: "Tag metadata lookups: hit (no request), checked (a manifest HEAD confirmed it) or miss (fetched).",
		}, []string{"result"}),
		lists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxd_registry_tag_list_lookups_total",
			Help: "Tag list lookups: hit (a fresh list reused from memory, no request), stored (a fresh list kept in the history store across a restart, no request) or read (listed from the registry).",
		}, []string{"result"}),
		scan: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxd_registry_scan_duration_seconds",
			Help:    "How long a repository scan took.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"host"}),
		tags: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxd_registry_tags",
			Help: "Tags in a repository at its last scan.",
		}, []string{"repository"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxd_registry_rate_per_second",
			Help: "The request rate fluxd allows itself per registry host now (it halves on 429).",
		}, []string{"host"}),
	}
	reg.MustRegister(m.requests, m.sigs, m.cache, m.lists, m.scan, m.tags, m.rate)
	return m
}
