package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/version"
	"github.com/fluxd/fluxd/platform/kube"
)

// flags are the daemon's command-line flags; run turns them into the
// components' Configs.
type flags struct {
	listen        string
	tokensFile    string
	shutdownGrace time.Duration
	logLevel      string
	logFormat     string
	kubeconfig    string
	kubeContext   string
	namespaces    []string
}

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
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:3030", "TCP address of the gRPC API")
	fs.StringVar(&f.tokensFile, "tokens-file", "", "file of hashed API tokens (see 'fluxd token create')")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight calls may finish on shutdown")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: its current context)")
	fs.StringSliceVar(&f.namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	cmd.AddCommand(newTokenCommand(), newVersionCommand())
	return cmd
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func run(ctx context.Context, f flags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg := daemon.Config{
		Listen:        f.listen,
		TokensFile:    f.tokensFile,
		ShutdownGrace: f.shutdownGrace,
		Version:       version.String(),
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", indent(err))
	}
	tokens, err := auth.Open(cfg.TokensFile)
	if err != nil {
		return err
	}

	kcfg := kube.Config{Kubeconfig: f.kubeconfig, Context: f.kubeContext, Namespaces: f.namespaces}
	rc, err := kube.RESTConfig(kcfg)
	if err != nil {
		return err
	}
	cluster, err := kube.New(rc, kcfg)
	if err != nil {
		return err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = cluster.Ping(pingCtx)
	cancel()
	if err != nil {
		return err
	}
	cluster.Start(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = cluster.WaitForSync(syncCtx)
	cancel()
	if err != nil {
		return err
	}
	log.Info("watching the cluster", "component", "platform", "host", rc.Host, "namespaces", namespacesOrAll(f.namespaces))

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another fluxd running there? choose another --listen address)", cfg.Listen, err)
	}
	d := daemon.New(cfg, cluster, log)
	srv := daemon.NewServer(d, tokens, log)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(ctx, lis, cfg.ShutdownGrace) })
	log.Info("fluxd started", "version", cfg.Version, "listen", lis.Addr().String())
	err = g.Wait()
	log.Info("fluxd stopped")
	return err
}

func namespacesOrAll(ns []string) string {
	if len(ns) == 0 {
		return "all"
	}
	return strings.Join(ns, ",")
}

func indent(err error) error {
	return fmt.Errorf("  - %s", strings.ReplaceAll(err.Error(), "\n", "\n  - "))
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
