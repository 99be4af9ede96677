package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gates"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/version"
	"github.com/fluxd/fluxd/release"
)

func newRootCommand() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:           "fluxd",
		Short:         "fluxd releases new container images through git to Kubernetes",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	f.register(cmd.Flags())
	cmd.AddCommand(newTokenCommand(), newVersionCommand(), newDBCommand())
	return cmd
}

// run is fluxd: it checks the flags, builds each component in the order
// they depend on one another, starts them, and waits until ctx ends (a
// signal) or one of them fails. Each step is a constructor of its own,
// in the file named after the component.
func run(ctx context.Context, f flags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg, err := f.configure()
	if err != nil {
		return err
	}
	limited := applyMemoryLimit(f.memoryLimitRatio, log)
	applyGCPercent(f.gcPercent, limited, log)
	if w := gogit.PlaintextWarning(f.gitURL); w != "" {
		log.Warn(w, "component", "git")
	}
	// Ends the clone's retries on any return below.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// The health listener answers first thing, saying what fluxd is
	// waiting for until the daemon is built (see startupHealth).
	health, healthStopped, err := startHealth(ctx, f.healthListen, log)
	if err != nil {
		return err
	}
	defer func() { stop(); healthStopped() }()

	store, err := openStore(ctx, f.stateDir, cfg.store, health, log)
	if err != nil {
		return err
	}
	defer store.Close()
	tokens, err := openTokens(cfg.daemon.TokensFile, log)
	if err != nil {
		return err
	}
	cluster, rc, err := openCluster(ctx, cfg.kube, health, log)
	if err != nil {
		return err
	}
	reg := newMetricsRegistry()
	notices, sender, err := newNotifier(f.notify, store, reg, log)
	if err != nil {
		return err
	}
	images, err := openImages(ctx, f, cluster, store, reg, log)
	if err != nil {
		return err
	}
	// Before the store closes (deferred above): the tag lists being
	// saved are written first.
	defer images.Close()
	repo, err := openGit(ctx, cfg.git, f.gitSSHKeySecret, cluster, health, reg, log)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	if err := startCloning(ctx, g, repo, cfg.git, f.gitCloneRetryMax, health, log); err != nil {
		return err
	}
	engine := release.NewEngine(repo, images, cluster, store, log)
	verifier, verifyConfig, err := newVerifier(ctx, f.verify, images, store, rc, reg, log)
	if err != nil {
		return err
	}
	if verifier != nil {
		engine.SetVerifier(verifier)
	}
	guard := newGuard(ctx, f.sync, rc, tokens, log)
	cluster.SetGuard(guard)
	syncs, err := newSyncer(f.sync, syncSource(cfg.git.URL, cfg.git.Branch, cfg.git.Paths), rc, guard, engine, store, reg, log)
	if err != nil {
		return err
	}
	queue, auto := newAutomation(f, engine, store, tokens, reg, log)

	peer, err := f.tls.peer()
	if err != nil {
		return err
	}
	if cfg.election != nil && peer == nil {
		log.Warn("followers will not forward calls to the leader, nor pass webhooks on: that needs replica TLS (--tls-cert-file, --tls-key-file, --replica-ca-file); callers of a follower are told to call the leader", "component", "leader")
	}
	lis, err := listenAPI(f, cfg.daemon.Listen, log)
	if err != nil {
		return err
	}
	proxies, err := f.proxies()
	if err != nil {
		return err
	}
	// The promotion loop reads the daemon's view, and the daemon serves
	// the loop's calls: the view is bound once the daemon exists.
	var d *daemon.Daemon
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	checks := gates.New(kc, gates.WithLogger(log.With("component", "gates")))
	promoHooks := &noticeHooks{}
	promo := newPromotion(engine, queue, viewOf(func() *daemon.Daemon { return d }), images, store, checks, tokens, promoHooks, log)
	d, srv := newAPI(cfg.daemon, apiParts{cluster: cluster, engine: engine, images: images, store: store, auto: auto, queue: queue, repo: repo, syncs: syncs, proxies: proxies, promo: promo}, tokens, reg, log)
	queue.OnEnd(func(history.Job) { auto.Poke(); promo.Wake() })
	g.Go(func() error { loadPipelines(ctx, engine, promo, log); return nil })
	self := lis.Addr().String()
	if cfg.election != nil {
		if self, err = advertise(f, self); err != nil {
			return err
		}
	}
	wh, err := listenWebhooks(f, d, promo, self, log)
	if err != nil {
		return err
	}
	webhookAt := ""
	if wh != nil {
		webhookAt = wh.at
	}
	leadership := newLeadership(self, webhookAt, reg)
	if f.webListen != "" {
		// Before the jobs run: it sets the queue's hooks.
		if err := startWeb(ctx, g, f, srv, d, queue, auto, promoHooks, tokens, store, log); err != nil {
			return err
		}
	}
	lead := leader{repo: repo, store: store, queue: queue, sender: sender, syncs: syncs, auto: auto, promo: promo, log: log}
	startLeading(ctx, g, cfg.election, self, leadership, peer, srv, wh, cluster, repo, lead.run, log)

	g.Go(func() error { return srv.Serve(ctx, lis, cfg.daemon.ShutdownGrace*4/5) })
	g.Go(func() error { runWatcher(ctx, notices); return nil })
	g.Go(func() error { watchVerifyConfig(ctx, verifyConfig, log); return nil })
	g.Go(func() error {
		select {
		case <-repo.Cloned():
			pollGit(ctx, engine, f.gitPollInterval, log)
		case <-ctx.Done():
		}
		return nil
	})
	health.serve(d.HealthHandlerWith(tokens))
	if wh != nil {
		wh.serve(ctx, g, log)
	}
	if err := serveMetrics(ctx, g, f, reg, log); err != nil {
		return err
	}
	log.Info("fluxd started", "version", cfg.daemon.Version, "listen", lis.Addr().String())
	exitAfterGrace(ctx, cfg.daemon.ShutdownGrace, log)
	err = g.Wait()
	log.Info("fluxd stopped")
	return err
}

// exitAfterGrace bounds a stop: whatever has not ended --shutdown-grace
// after the signal is abandoned (running jobs are left live in the store
// for the next fluxd, so nothing is lost), well before Kubernetes' own
// SIGKILL 30 s after its SIGTERM.
func exitAfterGrace(ctx context.Context, grace time.Duration, log *slog.Logger) {
	go func() {
		<-ctx.Done()
		time.Sleep(grace)
		log.Error("fluxd did not stop within --shutdown-grace; exiting now", "grace", grace)
		os.Exit(1)
	}()
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fluxd's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
}
