package daemon

import (
	"context"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// StatusNotWatched is the status of a service in git whose namespace
// fluxd does not watch (--namespaces): fluxd cannot tell whether it is in
// the cluster, and never releases it.
const StatusNotWatched = "not watched"

// markUnreleasable marks the services in git that fluxd will not release,
// when the cluster can say (release.Access): one outside --namespaces gets
// the status "not watched", one its credentials may not patch keeps its
// rollout status; both get a warning saying why and what to bind. The
// access reviews behind it are the cluster's, reused for a few seconds;
// one that cannot be made marks nothing.
func (d *Daemon) markUnreleasable(ctx context.Context, byID map[platform.ID]*Service) {
	acc, ok := d.deps.Cluster.(release.Access)
	if !ok {
		return
	}
	for id, s := range byID {
		if !s.InGit {
			continue
		}
		if err := acc.Watched(id); err != nil {
			if !s.InCluster {
				s.Status = StatusNotWatched
			}
			s.Warnings = append(s.Warnings, release.RefusedReason(err))
			continue
		}
		if err := acc.MayRelease(ctx, id); err != nil {
			if why := release.RefusedReason(err); why != "" {
				s.Warnings = append(s.Warnings, why)
			} else {
				d.log.Debug("cannot tell whether fluxd may release a service", "service", id.String(), "error", err)
			}
		}
	}
}
