package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fluxd/fluxd/platform/kube"
)

// openCluster connects to the Kubernetes API server, starts the cluster
// caches and waits for their first sync, saying at each step what fluxd
// waits for.
func openCluster(ctx context.Context, cfg kube.Config, health *startupHealth, log *slog.Logger) (*kube.Cluster, *rest.Config, error) {
	rc, err := kube.RESTConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	cluster, err := kube.New(rc, cfg)
	if err != nil {
		return nil, nil, err
	}
	health.starting("reaching the Kubernetes API server " + rc.Host)
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = cluster.Ping(pingCtx)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	health.starting("syncing the cluster caches")
	cluster.Start(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = cluster.WaitForSync(syncCtx)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	log.Info("watching the cluster", "component", "platform", "host", rc.Host, "namespaces", namespacesOrAll(cfg.Namespaces))
	return cluster, rc, nil
}

func namespacesOrAll(ns []string) string {
	if len(ns) == 0 {
		return "all"
	}
	return strings.Join(ns, ",")
}
