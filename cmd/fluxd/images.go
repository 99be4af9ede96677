package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxd/fluxd/registry/oci"
)

// openImages builds the registry client: its credentials (docker config,
// --registry-credentials, --registry-secret), rate limits, tag-list
// paging and caches, the cache kept in the history store.
func openImages(ctx context.Context, f flags, cluster secretReader, cache registryStore, reg prometheus.Registerer, log *slog.Logger) (*oci.Client, error) {
	keychains, err := registryKeychains(ctx, cluster, f.registrySecrets, f.registryCredentials)
	if err != nil {
		return nil, err
	}
	return oci.New(oci.Config{
		Metrics: oci.NewMetrics(reg), Log: log,
		DockerConfig: f.dockerConfig, Concurrency: f.registryConcurrency, Platform: f.registryPlatform,
		Keychains:  keychains,
		Cache:      cache,
		Lists:      cache,
		Rate:       oci.RateConfig{Rate: f.registryRate, Burst: f.registryBurst},
		RecheckMin: f.recheckMin, RecheckMax: f.recheckMax,
		ListMin: f.listMin, ListMax: f.listMax,
		PageSize:    pageSize(f.registryPageSize),
		MaxTagPages: f.registryMaxTagPages, MaxTagListBytes: f.registryMaxTagBytes,
	})
}

// registryStore is what the registry client keeps in the history store:
// tag metadata and tag lists.
type registryStore interface {
	oci.Cache
	oci.ListStore
}

// pageSize maps --registry-page-size to oci.Config.PageSize, where 0 sends
// no n at all.
func pageSize(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
