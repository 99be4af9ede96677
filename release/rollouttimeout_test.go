package release

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// A job taken over while it rolled out keeps its rollout's deadline: the
// timeout runs from when the rollout began (as its log, in a real SQLite
// store, says), not again from the take-over.
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
	specJSON, _ := json.Marshal(spec)
	planJSON, _ := json.Marshal(res.Plan)
	if _, err := g.store.SaveJob(ctx, history.Job{ID: "j1", Instance: "team", State: history.JobRunning, Stage: StageRollingOut, Spec: specJSON, Plan: planJSON,
		Commit: res.Commit, CreatedAt: began.Add(-time.Minute), StartedAt: began.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for i, l := range []history.JobLogLine{{Stage: StagePushing, Text: "pushing the commit", Time: began.Add(-time.Second)}, {Stage: StageRollingOut, Text: "following the rollout", Time: began}} {
		l.JobID, l.Instance, l.Seq = "j1", "team", int64(i+1)
		if err := g.store.AppendJobLog(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	q := NewQueue(g.e, g.store, 0, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go q.Run(rctx)
	for rctx.Err() == nil {
		j, err := g.store.Job(ctx, "team", "j1")
		if err == nil && j.State.Final() {
			if j.State != history.JobFailed || !strings.Contains(j.Error, "rollout timeout of 30m0s") {
				t.Fatalf("the taken-over job ended %s: %s; want it failed at its rollout timeout", j.State, j.Error)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the taken-over job is still following a rollout whose 30-minute timeout ran out 10 minutes ago")
}
