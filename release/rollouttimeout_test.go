package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// A job taken over while it rolled out keeps its rollout's deadline: the
// timeout runs from when the rollout began (ExecOptions.RolloutStarted,
// which the queue reads from the job's log: release/jobs'
// TestRecoverPassesTheRolloutStart), not again from the take-over.
func TestTakenOverRolloutKeepsItsDeadline(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana", RolloutTimeout: 30 * time.Minute}
	res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	// It has rolled out for 40 minutes when its fluxd died; it never
	// finishes.
	g.cluster.workloads = []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "updating"}}
	began := time.Now().Add(-40 * time.Minute)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	o := ExecOptions{RolloutTimeout: spec.RolloutTimeout, JobID: "j1", Started: began.Add(-time.Minute), RolloutStarted: began}
	_, err = g.e.Resume(rctx, "team", spec, res.Plan, res.Commit, history.Release, o)
	if rctx.Err() != nil {
		t.Fatal("the taken-over job is still following a rollout whose 30-minute timeout ran out 10 minutes ago")
	}
	if err == nil || !strings.Contains(err.Error(), "rollout timeout of 30m0s") {
		t.Fatalf("the taken-over release ended with %v; want it failed at its rollout timeout", err)
	}
}
