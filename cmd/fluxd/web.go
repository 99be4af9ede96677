package main

import (
	"context"
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
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/web"
)

// startWeb serves the status page on --web-listen, its live events fed by
// the job queue and the daemon's notifications.
func startWeb(ctx context.Context, g *errgroup.Group, f flags, srv *daemon.Server, d *daemon.Daemon, jobs *release.Queue, auto *automator.Automator, tokens *auth.Store, log *slog.Logger) error {
	hub := web.NewHub(0)
	jobs.OnUpdate(func(u release.JobUpdate) { hub.Publish(u.Job.Instance, "job", daemon.WatchJobResponse(u)) })
	jobs.OnLog(func(l history.JobLogLine) { hub.Publish(l.Instance, "log", daemon.JobLogLine(l)) })
	// A pass of the automator may change any service's state: the event
	// carries nothing, the page reads its services again.
	auto.OnChange(func() { hub.Publish("", "automation", &emptypb.Empty{}) })
	d.OnNotify(func(repo string, tags int) {
		hub.Publish("", "notify", &fluxdv1.ImageNotification{Repository: repo, Tags: int32(tags), At: timestamppb.New(time.Now())})
	})
	conn, err := srv.InProcess()
	if err != nil {
		return err
	}
	h, err := web.New(ctx, web.Config{Auth: tokens, Conn: conn, Hub: hub, Log: log})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", f.webListen)
	if err != nil {
		return fmt.Errorf("listening for the status page on %s: %w (choose another --web-listen address)", f.webListen, err)
	}
	if lis, err = f.tls.secure(lis, "the status page", false, log, "http/1.1"); err != nil {
		return err
	}
	g.Go(func() error { defer conn.Close(); return web.Serve(ctx, lis, h, log) })
	return nil
}
