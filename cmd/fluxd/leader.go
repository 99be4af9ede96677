package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/notify"
	"github.com/fluxd/fluxd/platform/kube"
	"github.com/fluxd/fluxd/promotion"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/syncer"
)

// leader is what runs only on the replica that leads: the job queue, the
// notifications' sender, the sync and the automator.
type leader struct {
	repo   interface{ Cloned() <-chan struct{} }
	store  interface{ Wait(context.Context) error }
	queue  *jobs.Queue
	sender *notify.Sender
	syncs  *syncer.Syncer // nil: no sync
	auto   *automator.Automator
	promo  *promotion.Controller
	log    *slog.Logger
}

// run leads until ctx ends: first it carries on with the jobs a previous
// leader (or run) left live.
func (l leader) run(ctx context.Context) {
	// Nothing to lead before the manifests are cloned.
	select {
	case <-l.repo.Cloned():
	case <-ctx.Done():
		return
	}
	if err := l.store.Wait(ctx); err != nil {
		return
	}
	if err := l.queue.Recover(ctx); err != nil {
		l.log.Error("cannot carry on with the jobs a previous fluxd left; they stay as they are", "error", err)
	}
	done := make(chan struct{})
	go func() { l.queue.Run(ctx); close(done) }()
	sent := make(chan struct{})
	go func() { l.sender.Run(ctx); close(sent) }()
	defer func() { <-sent }()
	if l.syncs != nil {
		syncDone := make(chan struct{})
		go func() { l.syncs.Run(ctx); close(syncDone) }()
		defer func() { <-syncDone }()
	}
	promoDone := make(chan struct{})
	go func() { l.promo.Run(ctx); close(promoDone) }()
	defer func() { <-promoDone }()
	l.auto.Run(ctx)
	<-done
}

// newLeadership is who leads, as this replica sees it, exported as
// fluxd_leader. self is the address other replicas reach this one's API
// at; webhookAt, its webhook listener's ("" without one).
func newLeadership(self, webhookAt string, reg prometheus.Registerer) *kube.Leadership {
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	leadership := kube.NewLeadership(self, hex.EncodeToString(raw[:]), webhookAt)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_leader", Help: "1 while this replica leads (runs automation and jobs)."}, func() float64 {
		if leadership.IsLeader() {
			return 1
		}
		return 0
	}))
	return leadership
}

// startLeading runs lead in g: on this replica alone (election nil), or,
// with --leader-elect, whenever it holds the Lease. Followers forward
// calls and webhooks to the leader over replica TLS (peer; none when nil).
func startLeading(ctx context.Context, g *errgroup.Group, election *kube.ElectionConfig, self string, leadership *kube.Leadership, peer *tls.Config,
	srv *daemon.Server, wh *webhooks, cluster *kube.Cluster, repo interface{ Cloned() <-chan struct{} }, lead func(context.Context), log *slog.Logger) {
	if election == nil {
		leadership.SetLeader()
		g.Go(func() error { lead(ctx); return nil })
		return
	}
	cfg := *election
	cfg.Address = self
	srv.FollowLeader(self, leadership, peer)
	if peer != nil {
		// A forwarded call is taken only with a replica certificate.
		srv.RequireReplicaCerts(peer.RootCAs)
	}
	if wh != nil {
		wh.handler.FollowLeader(leadership, peer)
		if peer != nil {
			wh.handler.RequireReplicaCerts(peer.RootCAs)
		}
	}
	g.Go(func() error {
		// Campaign only once cloned: a replica that cannot reach git
		// would hold the Lease and lead nothing (lead waits for the
		// clone), while a replica that can clone waited behind it.
		select {
		case <-repo.Cloned():
		case <-ctx.Done():
			return nil
		}
		return cluster.Elect(ctx, cfg, leadership, lead, log)
	})
}

// advertise is the address other replicas reach this one at.
func advertise(f flags, listen string) (string, error) {
	if f.advertiseAddress != "" {
		return f.advertiseAddress, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listen, nil
	}
	if pod := os.Getenv("POD_IP"); pod != "" {
		return net.JoinHostPort(pod, port), nil
	}
	return "", fmt.Errorf("--leader-elect: --listen %s names no host other replicas can reach; set --advertise-address (or POD_IP from the downward API)", listen)
}
