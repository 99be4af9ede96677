package daemon

import (
	"context"

	"github.com/fluxd/fluxd/internal/auth"
)

// The daemon's side of registry webhooks: package webhook serves them
// (authentication, payloads, the queue) and calls these two, its
// webhook.Refresher.

// RefuseUnwatched refuses a repository that no service fluxd watches
// runs, before any request is made for it (a payload's hosts are the
// sender's to choose).
func (d *Daemon) RefuseUnwatched(ctx context.Context, repository string) error {
	return d.watched(ctx, repository)
}

// RefreshNotified refreshes the repository of a notified image and wakes
// the automator, as NotifyImage does, as webhookIdentity.
func (d *Daemon) RefreshNotified(ctx context.Context, image string) error {
	_, _, err := d.Notify(ctx, webhookIdentity, image)
	return err
}

// webhookIdentity is who a notification acts as: it only refreshes
// shared registry data, never anything of an instance.
var webhookIdentity = auth.Identity{Instance: "webhook", Role: auth.Deployer}
