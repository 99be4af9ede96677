package daemon

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/syncer"
)

// lastSync is a Syncing that only reports its last sync.
type lastSync struct {
	rep     *syncer.Report
	running bool
}

func (l lastSync) Running() bool { return l.running }

func (l lastSync) Sync(context.Context, bool, bool) (*syncer.Report, error) { return l.rep, nil }
func (l lastSync) Last() *syncer.Report                                     { return l.rep }

// TestAutoscaledReplicasAreNotDrift: a workload whose replicas an
// HorizontalPodAutoscaler sets (the sync marked it autoscaled) is synced
// though its replicas differ from git's; another is drifted.
func TestAutoscaledReplicasAreNotDrift(t *testing.T) {
	t.Parallel()
	four := int32(4)
	mk := func(name string) *Service {
		return &Service{ID: platform.ID{Namespace: "shop", Kind: "deployment", Name: name}, InCluster: true,
			Replicas: platform.Replicas{Desired: 7}, def: &gitrepo.Definition{Replicas: &four}}
	}
	scaled, fixed := mk("scaled"), mk("fixed")
	rep := &syncer.Report{Results: []platform.ObjectResult{
		{Ref: platform.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "scaled"}, Action: platform.ActionUnchanged, Autoscaled: true},
		{Ref: platform.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "fixed"}, Action: platform.ActionUnchanged},
	}}
	d := &Daemon{deps: Deps{Sync: lastSync{rep: rep, running: true}}}
	d.syncStates(map[platform.ID]*Service{scaled.ID: scaled, fixed.ID: fixed})
	if scaled.SyncState != SyncSynced {
		t.Errorf("the autoscaled workload is %s (%s), want synced", scaled.SyncState, scaled.SyncDetail)
	}
	if fixed.SyncState != SyncDrifted {
		t.Errorf("the workload without autoscaler is %s, want drifted", fixed.SyncState)
	}
}

// TestFollowerSaysTheLeaderSyncs: a replica that does not run the sync
// (a follower) says so, rather than "pending" for ever.
func TestFollowerSaysTheLeaderSyncs(t *testing.T) {
	t.Parallel()
	four := int32(4)
	mk := func() *Service {
		return &Service{ID: platform.ID{Namespace: "shop", Kind: "deployment", Name: "web"}, InCluster: true,
			Replicas: platform.Replicas{Desired: 4}, def: &gitrepo.Definition{Replicas: &four}}
	}
	follower, leader := mk(), mk()
	(&Daemon{deps: Deps{Sync: lastSync{}}}).syncStates(map[platform.ID]*Service{follower.ID: follower})
	(&Daemon{deps: Deps{Sync: lastSync{running: true}}}).syncStates(map[platform.ID]*Service{leader.ID: leader})
	if follower.SyncState != SyncOnLeader {
		t.Errorf("a follower's state = %q, want %q", follower.SyncState, SyncOnLeader)
	}
	if leader.SyncState != SyncPending {
		t.Errorf("the leader's state before its first sync = %q, want %q", leader.SyncState, SyncPending)
	}
}
