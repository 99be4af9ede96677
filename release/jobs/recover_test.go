package jobs

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// resumeExec hands over the options of every take-over it is asked for.
type resumeExec struct {
	gateExec
	resumed chan release.ExecOptions
}

func (r *resumeExec) Resume(_ context.Context, _ string, _ release.Spec, plan *release.Plan, commit string, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	r.resumed <- o
	return &release.Result{Plan: plan, Commit: commit}, nil
}

// A job taken over while it rolled out is resumed with the time its
// rollout began, as its log in a real SQLite store says, and its own
// rollout timeout: the engine's deadline runs from then
// (release.TestTakenOverRolloutKeepsItsDeadline), not again from the
// take-over.
func TestRecoverPassesTheRolloutStart(t *testing.T) {
	_, _, store := newQueue(t)
	ctx := context.Background()
	spec := release.Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana", RolloutTimeout: 30 * time.Minute}
	plan := &release.Plan{Items: []release.Item{{Service: id("web"), Action: release.Update, Updates: []release.ContainerUpdate{{Container: "web", Current: "reg/web:1.0", Target: "reg/web:1.2"}}}}}
	began := time.Now().Add(-40 * time.Minute).Truncate(time.Second)
	specJSON, _ := json.Marshal(spec)
	planJSON, _ := json.Marshal(plan)
	if _, err := store.SaveJob(ctx, history.Job{ID: "j1", Instance: "team", State: history.JobRunning, Stage: release.StageRollingOut, Spec: specJSON, Plan: planJSON,
		Commit: "c0ffee", CreatedAt: began.Add(-time.Minute), StartedAt: began.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for i, l := range []history.JobLogLine{{Stage: release.StagePushing, Text: "pushing the commit", Time: began.Add(-time.Second)}, {Stage: release.StageRollingOut, Text: "following the rollout", Time: began}} {
		l.JobID, l.Instance, l.Seq = "j1", "team", int64(i+1)
		if err := store.AppendJobLog(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	exec := &resumeExec{resumed: make(chan release.ExecOptions, 1)}
	q := NewQueue(exec, store, 0, false, slog.New(slog.DiscardHandler))
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go q.Run(rctx)
	var o release.ExecOptions
	select {
	case o = <-exec.resumed:
	case <-time.After(20 * time.Second):
		t.Fatal("the live job was not taken over")
	}
	if !o.RolloutStarted.Equal(began) || o.RolloutTimeout != 30*time.Minute || o.JobID != "j1" || !o.Started.Equal(began.Add(-time.Minute)) {
		t.Errorf("taken over with rollout started %v, timeout %v, job %q, started %v; want %v, 30m, j1, %v",
			o.RolloutStarted, o.RolloutTimeout, o.JobID, o.Started, began, began.Add(-time.Minute))
	}
	waitState(t, q, "team", "j1", history.JobSucceeded)
}
