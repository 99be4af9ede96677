package jobs

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// chattyExec reports many rollout updates, then succeeds.
type chattyExec struct{ gateExec }

func (c *chattyExec) Execute(ctx context.Context, _ string, spec release.Spec, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	for i := 0; i < 300; i++ {
		o.Report(release.Progress{Stage: release.StageRollingOut, Commit: "c1", Workloads: []release.WorkloadProgress{{Service: id("web"), Replicas: replicas(int32(i))}}})
	}
	return &release.Result{Plan: &release.Plan{}, Commit: "c1"}, nil
}

func replicas(n int32) platform.Replicas { return platform.Replicas{Desired: 300, Updated: n} }

// A watcher that reads nothing while its job runs (a slow fluxctl, a
// congested stream) still gets the job's final state last: fluxctl
// release decides its exit code from it.
func TestSlowWatcherGetsTheFinalUpdate(t *testing.T) {
	q, _, _ := newQueue(t)
	q.exec = &chattyExec{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := q.Enqueue(ctx, "team", release.Spec{Message: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := q.Watch(ctx, "team", u.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	go q.Run(ctx)
	waitState(t, q, "team", u.Job.ID, history.JobSucceeded)
	var last JobUpdate
	n := 0
	for u := range ch {
		last, n = u, n+1
	}
	if last.Job.State != history.JobSucceeded {
		t.Fatalf("the watcher's last of %d updates is %s at stage %q; want the job's end, succeeded", n, last.Job.State, last.Job.Stage)
	}
}

func id(name string) platform.ID {
	return platform.ID{Namespace: "default", Kind: "deployment", Name: name}
}

// A watcher that learns of a job's end finds it counted in Ended (the
// daemon's view of services is rebuilt for it, so the cluster as the job
// left it shows in the next list-services).
func TestJobEndCountedBeforeItIsPublished(t *testing.T) {
	q, _, _ := newQueue(t)
	q.exec = &chattyExec{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := q.Enqueue(ctx, "team", release.Spec{Message: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := q.Watch(ctx, "team", u.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	go q.Run(ctx)
	for u := range ch {
		if u.Job.State == history.JobSucceeded && q.Ended() != 1 {
			t.Fatalf("the job's end was published with Ended() = %d; want 1", q.Ended())
		}
	}
	if q.Ended() != 1 {
		t.Errorf("Ended() = %d after one job; want 1", q.Ended())
	}
}
