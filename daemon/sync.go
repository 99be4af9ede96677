package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/syncer"
)

// Syncing is the continuous sync as the daemon sees it.
type Syncing interface {
	// Sync syncs now (fetching git first when fetch is set), or says
	// what a sync would do.
	Sync(ctx context.Context, fetch, dryRun bool) (*syncer.Report, error)
	// Last is the last sync's report, nil before the first.
	Last() *syncer.Report
	// Running reports whether this replica runs the sync (it leads).
	Running() bool
}

// The sync states of a service.
const (
	SyncSynced  = "synced"
	SyncDrifted = "drifted"
	SyncFailed  = "failed"
	SyncPending = "pending"
	// SyncOnLeader is a follower's: the leader syncs, this replica has no
	// report of its own.
	SyncOnLeader = "on-leader"
)

// syncStates sets each service's goal images (the image git defines,
// where another runs) and, when fluxd syncs, its state against git.
func (d *Daemon) syncStates(byID map[platform.ID]*Service) {
	var last *syncer.Report
	if d.deps.Sync != nil {
		last = d.deps.Sync.Last()
	}
	failed := map[platform.ID]string{}
	autoscaled := map[platform.ID]bool{}
	if last != nil {
		for _, r := range last.Results {
			id, ok := r.Ref.Workload()
			if ok && r.Action == platform.ActionFailed {
				failed[id] = strings.TrimPrefix(r.Where+": ", ": ") + r.Error
			}
			if ok && r.Autoscaled {
				autoscaled[id] = true
			}
		}
	}
	for _, s := range byID {
		if s.def == nil {
			continue
		}
		var drift []string
		if s.InCluster {
			for _, c := range s.Containers {
				for _, g := range s.def.Containers {
					if g.Name == c.Name && g.Image != c.Image {
						if s.Goals == nil {
							s.Goals = map[string]string{}
						}
						s.Goals[c.Name] = g.Image
						drift = append(drift, fmt.Sprintf("container %s runs %s, git says %s", c.Name, c.Image, g.Image))
					}
				}
			}
			// An autoscaler's replicas are not drift: the sync leaves them.
			if r := s.def.Replicas; r != nil && (s.ID.Kind == "deployment" || s.ID.Kind == "statefulset") && *r != s.Replicas.Desired && !autoscaled[s.ID] {
				drift = append(drift, fmt.Sprintf("%d replicas, git says %d", s.Replicas.Desired, *r))
			}
		} else {
			drift = append(drift, "not in the cluster")
		}
		switch {
		case d.deps.Sync == nil:
		case failed[s.ID] != "":
			s.SyncState, s.SyncDetail = SyncFailed, failed[s.ID]
		case len(drift) > 0:
			s.SyncState, s.SyncDetail = SyncDrifted, strings.Join(drift, "; ")
		case last == nil && !d.deps.Sync.Running():
			s.SyncState, s.SyncDetail = SyncOnLeader, "the sync runs on the leader replica (fluxctl sync reaches it); this replica has not synced"
		case last == nil:
			s.SyncState, s.SyncDetail = SyncPending, "no sync has run yet"
		default:
			s.SyncState = SyncSynced
		}
	}
}

// Sync fetches git and applies it to the cluster now, or says what that
// would change.
func (d *Daemon) Sync(ctx context.Context, _ auth.Identity, dryRun bool) (*syncer.Report, error) {
	if err := checkSyncScope(ctx); err != nil {
		return nil, err
	}
	if d.deps.Sync == nil {
		return nil, fluxerr.New(fluxerr.Precondition, errors.New("this fluxd does not sync git to the cluster"),
			"It applies only the workloads it releases. Start it with --sync-interval (e.g. 5m) to apply everything under --git-path, on every commit and on that interval.")
	}
	rep, err := d.deps.Sync.Sync(ctx, true, dryRun)
	if err != nil {
		return nil, err
	}
	if !dryRun {
		d.invalidate() // list-services reads the new revision
	}
	return rep, nil
}

// syncStarter is a Syncing that can start a sync without waiting for it
// (syncer.Syncer).
type syncStarter interface{ Start() error }

// StartSync starts a sync (git fetched first) and returns at once.
func (d *Daemon) StartSync(ctx context.Context, _ auth.Identity) error {
	if err := checkSyncScope(ctx); err != nil {
		return err
	}
	st, ok := d.deps.Sync.(syncStarter)
	if d.deps.Sync == nil || !ok {
		return fluxerr.New(fluxerr.Precondition, errors.New("this fluxd does not sync git to the cluster"),
			"It applies only the workloads it releases. Start it with --sync-interval (e.g. 5m) to apply everything under --git-path, on every commit and on that interval.")
	}
	if err := st.Start(); err != nil {
		return fluxerr.New(fluxerr.Unavailable, err, "With --leader-elect only the leader syncs: ask the leader, or run 'fluxctl sync' without --no-wait, which this replica forwards or runs itself.")
	}
	return nil
}

// Sync runs a sync now, or a dry run of one, or starts one (no_wait).
func (s *Server) Sync(ctx context.Context, req *fluxdv1.SyncRequest) (*fluxdv1.SyncResponse, error) {
	if req.GetNoWait() {
		if req.GetDryRun() {
			return nil, toStatus(fluxerr.New(fluxerr.User, errors.New("--no-wait and --dry-run together"), "A dry run's answer is its report: run it without --no-wait."))
		}
		if err := s.d.StartSync(ctx, identity(ctx)); err != nil {
			return nil, toStatus(err)
		}
		return &fluxdv1.SyncResponse{Started: true}, nil
	}
	rep, err := s.d.Sync(ctx, identity(ctx), req.GetDryRun())
	if err != nil {
		return nil, toStatus(err)
	}
	return syncReportToProto(rep), nil
}

func syncReportToProto(rep *syncer.Report) *fluxdv1.SyncResponse {
	out := &fluxdv1.SyncResponse{Revision: rep.Revision, DryRun: rep.DryRun, Problems: rep.Problems, Error: rep.Err, DurationMs: rep.Duration.Milliseconds()}
	for _, r := range rep.Results {
		out.Objects = append(out.Objects, &fluxdv1.SyncObject{Object: r.Ref.String(), Source: r.Where, Action: r.Action, Error: r.Error, Diff: r.Diff})
	}
	return out
}

// withSyncEvents merges the sync's events (every instance's) into an
// instance's, newest first, at most limit.
func (d *Daemon) withSyncEvents(ctx context.Context, evs []history.Event, q history.Query) ([]history.Event, error) {
	if d.deps.Sync == nil {
		return evs, nil
	}
	syncs, err := d.deps.History.Events(ctx, history.SyncInstance, q)
	if err != nil {
		return nil, fmt.Errorf("reading the sync's history: %w", err)
	}
	evs = append(evs, syncs...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ID > evs[j].ID })
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return evs, nil
}
