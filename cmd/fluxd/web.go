package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
	"github.com/fluxd/fluxd/promotion"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/web"
)

// liveStore is the history store as the status pages' event stream
// needs it: the live log, and PostgreSQL's LISTEN (nil: poll).
type liveStore interface {
	web.LiveStore
	web.SessionStore
	Wait(ctx context.Context) error
	WaitLive(ctx context.Context) <-chan struct{}
}

// startWeb serves the status page on --web-listen, its live events fed by
// the job queue and the daemon's notifications of whichever replica leads,
// through the store: every replica's page is live.
func startWeb(ctx context.Context, g *errgroup.Group, f flags, srv *daemon.Server, d *daemon.Daemon, queue *jobs.Queue, auto *automator.Automator, promo *noticeHooks, tokens *auth.Store, store liveStore, log *slog.Logger) error {
	hub := web.NewHub(0).UseStore(store)
	g.Go(func() error {
		if store.Wait(ctx) != nil {
			return nil
		}
		wake := store.WaitLive(ctx)
		poll := 250 * time.Millisecond
		if wake != nil {
			poll = 2 * time.Second // NOTIFY wakes it; the poll is a safety net
		}
		hub.Run(ctx, wake, poll, log)
		return nil
	})
	queue.OnUpdate(func(u jobs.JobUpdate) { hub.PublishJob(u.Job.Instance, daemon.WatchJobResponse(u)) })
	queue.OnLog(func(l history.JobLogLine) { hub.Publish(l.Instance, "log", daemon.JobLogLine(l)) })
	// A pass of the automator may change any service's state: the event
	// carries nothing, the page reads its services again.
	auto.OnChange(func() { hub.Publish("", "automation", &emptypb.Empty{}) })
	// A change of a bundle's state in a stage, likewise: the event names
	// no pipeline, stage or bundle (it goes to every caller, through the
	// store to every replica), and the page reads the stages again, as
	// far as the caller's scope lets it see them.
	promo.On(func(promotion.Notice) { hub.Publish("", "promotion", &emptypb.Empty{}) })
	// A notification goes to the instances whose scope holds a service
	// that uses its repository (every unscoped instance sees every
	// service, so it tells them nothing new); a repository no service in
	// a caller's scope uses is none of its business, and its name is not
	// passed on.
	d.OnNotify(func(repo string, tags int) {
		at := time.Now()
		go func() {
			svcs, err := d.Services(ctx, auth.Identity{}, "")
			if err != nil {
				return
			}
			users := usesRepository(svcs, repo)
			if len(users) == 0 {
				return
			}
			audience := func(id auth.Identity) bool {
				for _, s := range users {
					if id.Scope.Contains(s.ID.Namespace, s.File()) {
						return true
					}
				}
				return false
			}
			hub.PublishTo(audience, "notify", &fluxdv1.ImageNotification{Repository: repo, Tags: int32(tags), At: timestamppb.New(at)})
		}()
	})
	conn, err := srv.InProcess()
	if err != nil {
		return err
	}
	proxies, err := f.proxies()
	if err != nil {
		return err
	}
	h, err := web.New(ctx, web.Config{Auth: tokens, Conn: conn, Hub: hub, Sessions: store, SecureCookie: f.webSecureCookie, TrustedProxies: proxies,
		GitWebURL: f.gitWebURL, Syncs: f.sync.interval > 0, Log: log})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", f.webListen)
	if err != nil {
		return fmt.Errorf("listening for the status page on %s: %w (choose another --web-listen address)", f.webListen, err)
	}
	if lis, err = webListener(f, lis, log); err != nil {
		return err
	}
	g.Go(func() error { defer conn.Close(); return web.Serve(ctx, lis, h, log) })
	return nil
}

// webListener wraps the status page's listener in TLS. With
// --tls-client-ca-file the page asks for client certificates as the API
// does: otherwise the page would be a way round the API's mutual TLS (its
// JSON API reaches the same methods). --web-allow-without-client-cert
// serves it without, for a page that browsers without a client
// certificate must reach (a token is still needed).
func webListener(f flags, lis net.Listener, log *slog.Logger) (net.Listener, error) {
	clientCerts := f.tls.clientCAFile != "" && !f.webAllowWithoutClientCert
	if f.tls.clientCAFile != "" && f.webAllowWithoutClientCert {
		log.Warn("the status page does not ask for client certificates although the API does (--web-allow-without-client-cert): anyone with a token reaches the API's methods through it", "component", "web")
	}
	return f.tls.secure(lis, "the status page", clientCerts, log, "http/1.1")
}

// usesRepository returns the services of svcs with a container, in the
// cluster or in git, that runs an image of repo.
func usesRepository(svcs []daemon.Service, repo string) []daemon.Service {
	var out []daemon.Service
	for _, s := range svcs {
		for _, c := range s.Containers {
			if ref, err := registry.ParseRef(c.Image); err == nil && ref.Repository == repo {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// validateWebFlags checks --trusted-proxies and --git-web-url at start.
func validateWebFlags(f flags) error {
	_, err := f.proxies()
	return errors.Join(err, web.ValidateGitWebURL(f.gitWebURL))
}

// proxies are --trusted-proxies, with those given under its former name.
func (f flags) proxies() (clientkey.Proxies, error) {
	return clientkey.ParseProxies(append(append([]string(nil), f.trustedProxies...), f.webTrustedProxies...))
}
