package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/fluxd/fluxd/notify"
)

// notifyFlags are the notifications' flags.
type notifyFlags struct {
	config string
	maxAge time.Duration
	webURL string
}

func (f *notifyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "notify-config", "", "YAML file of notification receivers (webhook, slack, teams, discord, github, gitlab, gitea; see docs/notifications.md), re-read when it changes; a bad edit is refused and the previous one kept (default: none)")
	fs.DurationVar(&f.maxAge, "notify-max-age", 24*time.Hour, "a notification not delivered within this long (a receiver down) is dropped and counted (fluxd_notify_deliveries_total{outcome=\"expired\"})")
	fs.StringVar(&f.webURL, "web-url", "", "the status page's address as people reach it, e.g. https://fluxd.example.com: notifications link to it (default: no links)")
}

// validate checks the flags and reads the config file, so that a bad
// one stops fluxd at once, naming its lines, before anything else starts.
func (f notifyFlags) validate() error {
	var errs []error
	if f.maxAge <= 0 {
		errs = append(errs, fmt.Errorf("--notify-max-age %v must be positive", f.maxAge))
	}
	if f.webURL != "" {
		if u, err := url.Parse(f.webURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--web-url %q is not an http:// or https:// URL", f.webURL))
		}
	}
	if f.config != "" {
		if _, err := notify.Load(f.config); err != nil {
			errs = append(errs, fmt.Errorf("--notify-config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// newNotifier builds the config watcher and the sender of the outbox.
// Without --notify-config the sender has no receivers and only prunes
// the outbox (Record writes a notice for every event).
func newNotifier(f notifyFlags, store notify.Outbox, reg prometheus.Registerer, log *slog.Logger) (*notify.Watcher, *notify.Sender, error) {
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	metrics := notify.NewMetrics(reg)
	var receivers notify.Receivers = notify.Static(&notify.Config{})
	var w *notify.Watcher
	if f.config != "" {
		var err error
		if w, err = notify.NewWatcher(f.config, 5*time.Second, metrics, log); err != nil {
			return nil, nil, fmt.Errorf("--notify-config: %w", err)
		}
		receivers = w
		cfg, _ := w.Config()
		log.Info("notification receivers", "component", "notify", "receivers", len(cfg.Receivers))
	}
	s := notify.NewSender(notify.SenderConfig{MaxAge: f.maxAge, WebURL: f.webURL, Metrics: metrics, Log: log}, store, receivers)
	return w, s, nil
}

// runWatcher re-reads the notification config until ctx ends.
func runWatcher(ctx context.Context, w *notify.Watcher) {
	if w != nil {
		w.Run(ctx)
	}
}
