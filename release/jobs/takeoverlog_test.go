package jobs

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/release"
)

// reportingExec takes a job over as the Engine does: it reports the
// commit it carries on with, then the rollout.
type reportingExec struct{ gateExec }

func (r *reportingExec) Resume(_ context.Context, _ string, _ release.Spec, _ *release.Plan, commit string, _ history.Type, o release.ExecOptions) (*release.Result, error) {
	o.Report(release.Progress{Stage: release.StageApplying, Commit: commit})
	o.Report(release.Progress{Stage: release.StageRollingOut, Commit: commit})
	return &release.Result{Plan: &release.Plan{}, Commit: commit}, nil
}

// A job taken over after its push says so once, and does not say it
// pushed its commit again: the fluxd that took it over pushed nothing.
func TestTakenOverJobsLogDoesNotSayItPushedAgain(t *testing.T) {
	_, _, store := newQueue(t)
	ctx := context.Background()
	q := NewQueue(&reportingExec{}, store, 0, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan := []byte(`{"Items":[{"Service":{"Namespace":"default","Kind":"deployment","Name":"app"},"Action":"update"}]}`)
	job := history.Job{ID: "j", Instance: "team", State: history.JobRunning, Stage: release.StageRollingOut, Spec: []byte(`{"Message":"m"}`), Plan: plan, Commit: "0123456789abcdef", CreatedAt: time.Now()}
	if _, err := store.SaveJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	// What the first fluxd wrote before it stopped.
	if err := store.AppendJobLog(ctx, history.JobLogLine{JobID: "j", Instance: "team", Seq: 1, Time: time.Now(), Stage: release.StageApplying, Text: "pushed commit 0123456789ab"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go q.Run(rctx)
	waitState(t, q, "team", "j", history.JobSucceeded)
	lines, err := q.JobLog(ctx, "team", "j", 0)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, l := range lines {
		text = append(text, l.Text)
	}
	log := strings.Join(text, "\n")
	if n := strings.Count(log, "pushed commit"); n != 1 {
		t.Errorf("the log says %d times that the commit was pushed; want once (by the first fluxd):\n%s", n, log)
	}
	if n := strings.Count(log, "taken over by this fluxd after commit 0123456789ab was pushed"); n != 1 {
		t.Errorf("the log says %d times that the job was taken over; want once:\n%s", n, log)
	}
}
