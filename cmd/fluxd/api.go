package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
	"github.com/fluxd/fluxd/platform/kube"
	"github.com/fluxd/fluxd/promotion"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/syncer"
)

// apiParts are the components the API answers from.
type apiParts struct {
	cluster *kube.Cluster
	engine  *release.Engine
	images  *oci.Client
	store   *historystore.Connecting
	auto    *automator.Automator
	queue   *jobs.Queue
	repo    *gogit.Repo
	syncs   *syncer.Syncer // nil: no sync
	promo   *promotion.Controller
	// proxies are --trusted-proxies: their connections count against
	// the API's connection limit only, not per client.
	proxies clientkey.Proxies
}

// What the daemon's image-notification pipeline uses where offered: a
// renamed method would otherwise drop out of it without a word.
var (
	_ daemon.TagRefresher       = (*oci.Client)(nil)
	_ daemon.ImageRefresher     = (*oci.Client)(nil)
	_ daemon.NotifiedAutomation = (*automator.Automator)(nil)
)

// newAPI builds the daemon (the API's operations) over the components
// and its gRPC server, told of every move of git the engine sees.
func newAPI(cfg daemon.Config, p apiParts, tokens *auth.Store, reg prometheus.Registerer, log *slog.Logger) (*daemon.Daemon, *daemon.Server) {
	// Ready is what the health service (Kubernetes' readiness probe)
	// reports, besides the git remote's state: the cluster caches and the
	// database.
	ready := func(ctx context.Context) error {
		return errors.Join(daemon.NotReady("cluster", p.cluster.Ready(ctx)), daemon.NotReady("database", p.store.Ping(ctx)))
	}
	deps := daemon.Deps{Cluster: p.cluster, Releaser: p.engine, Images: p.images, History: p.store, Automator: p.auto, Jobs: p.queue, Git: p.repo, SSHKey: p.repo, Ready: ready}
	if p.syncs != nil {
		deps.Sync = p.syncs
	}
	if p.promo != nil {
		deps.Promotions = p.promo
	}
	d := daemon.New(cfg, deps, log)
	p.engine.OnRevision(d.GitMoved)
	srv := daemon.NewServer(d, tokens, log, daemon.WithMetrics(reg), daemon.WithTrustedProxies(p.proxies))
	return d, srv
}
