package daemon

import (
	"context"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
)

// Running tells the promotion loop what a stage's services run, from the
// daemon's joined view of git and the cluster (whatever the caller's
// scope: the loop is fluxd's own). A service is Ready when it is in git
// and in the cluster, its rollout has ended, and every container runs
// the image git names for it: a release pushed and not yet applied or
// rolled out is not a bundle yet.
func (d *Daemon) Running(ctx context.Context, ids []platform.ID) ([]promotion.Running, error) {
	svcs, _, err := d.viewBuilt(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[platform.ID]*Service, len(svcs))
	for i := range svcs {
		byID[svcs[i].ID] = &svcs[i]
	}
	out := make([]promotion.Running, 0, len(ids))
	for _, id := range ids {
		s, ok := byID[id]
		r := promotion.Running{Service: id, Missing: !ok || !s.InCluster || !s.InGit}
		if !r.Missing {
			r.Ready = s.Status == "ready" && len(s.Goals) == 0
			for _, c := range s.Containers {
				r.Containers = append(r.Containers, promotion.RunningContainer{Name: c.Name, Image: c.Image})
			}
			if s.Locked {
				r.Locked = "locked"
				if s.LockMsg != "" {
					r.Locked += ": " + s.LockMsg
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}
