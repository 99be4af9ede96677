package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/util/workqueue"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/webhook"
)

// The daemon is what a registry notification acts on; client-go's
// workqueue is the webhook's queue.
var (
	_ webhook.Refresher = (*daemon.Daemon)(nil)
	_ webhook.Queue     = (*workqueue.Typed[string])(nil)
)

// listenAPI listens for the gRPC API on addr, with TLS when the flags
// ask for it.
func listenAPI(f flags, addr string, log *slog.Logger) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w (is another fluxd running there? choose another --listen address)", addr, err)
	}
	return f.tls.secure(lis, "the API", true, log, "h2")
}

// webhooks is the registry webhook listener, when --webhook-listen is set.
type webhooks struct {
	handler *webhook.Handler
	// mux serves the handler, and CI's approvals with
	// --approve-webhook-secret-file.
	mux *http.ServeMux
	lis net.Listener
	// at is the address followers pass notifications on to when this
	// replica leads: its host, the listener's port.
	at string
}

// listenWebhooks listens for registry webhooks (nil without
// --webhook-listen).
func listenWebhooks(f flags, d *daemon.Daemon, approver webhook.Approver, self string, log *slog.Logger) (*webhooks, error) {
	if f.webhookListen == "" {
		return nil, nil
	}
	secret, err := os.ReadFile(f.webhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("--webhook-listen needs --webhook-secret-file, a file holding the shared secret: %w", err)
	}
	w := &webhooks{}
	// client-go's workqueue coalesces notifications per repository.
	queue := workqueue.NewTyped[string]()
	if w.handler, err = webhook.New(d, queue, []byte(strings.TrimSpace(string(secret))), log); err != nil {
		return nil, fmt.Errorf("--webhook-secret-file %s: %w", f.webhookSecretFile, err)
	}
	w.handler.RequireTimestamp = f.webhookRequireTimestamp
	if w.handler.TrustedProxies, err = f.proxies(); err != nil {
		return nil, err
	}
	w.mux = http.NewServeMux()
	w.mux.Handle("/", w.handler)
	if f.approveWebhookSecretFile != "" {
		// Any replica takes an approval: it is a compare-and-swap on
		// the shared store, which the leader's loop then reads.
		sec, err := os.ReadFile(f.approveWebhookSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--approve-webhook-secret-file: %w", err)
		}
		a, err := webhook.NewApprovals(approver, f.approveWebhookKey, []byte(strings.TrimSpace(string(sec))), log)
		if err != nil {
			return nil, fmt.Errorf("--approve-webhook-secret-file %s: %w", f.approveWebhookSecretFile, err)
		}
		a.TrustedProxies = w.handler.TrustedProxies
		w.mux.Handle(webhook.ApprovePath, a)
	}
	if w.lis, err = net.Listen("tcp", f.webhookListen); err != nil {
		return nil, fmt.Errorf("listening for webhooks on %s: %w", f.webhookListen, err)
	}
	if w.lis, err = f.tls.secure(w.lis, "webhooks", false, log, "http/1.1"); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(self)
	_, port, _ := net.SplitHostPort(w.lis.Addr().String())
	w.at = net.JoinHostPort(host, port)
	return w, nil
}

// serve runs the webhooks' queue and listener in g.
func (w *webhooks) serve(ctx context.Context, g *errgroup.Group, log *slog.Logger) {
	g.Go(func() error { w.handler.Run(ctx); return nil })
	g.Go(func() error { return serveHTTP(ctx, w.lis, w.mux, "webhooks", log) })
}

// serveMetrics serves reg at /metrics on --metrics-listen, when set.
func serveMetrics(ctx context.Context, g *errgroup.Group, f flags, reg *prometheus.Registry, log *slog.Logger) error {
	if f.metricsListen == "" {
		return nil
	}
	mlis, err := net.Listen("tcp", f.metricsListen)
	if err != nil {
		return fmt.Errorf("listening for metrics on %s: %w", f.metricsListen, err)
	}
	if mlis, err = f.tls.secure(mlis, "metrics", false, log, "http/1.1"); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if f.pprof {
		servePprof(mux)
	}
	g.Go(func() error { return serveHTTP(ctx, mlis, mux, "metrics", log) })
	return nil
}

// newHTTPServer is the server of the webhook and metrics listeners. Every
// phase of a request is bounded, so that a client that sends or reads
// slowly cannot hold connections open: a webhook's body is at most 1 MiB,
// a metrics page is generated at once, and neither keeps a connection
// idle for long.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// serveHTTP serves h on lis until ctx ends.
func serveHTTP(ctx context.Context, lis net.Listener, h http.Handler, what string, log *slog.Logger) error {
	srv := newHTTPServer(h)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving "+what, "component", what, "address", lis.Addr().String())
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", what, err)
	}
	return nil
}
