package jobs

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/platform"
)

// rolloutExec pushes a one-service plan, reports its rollout, and
// records the release as the Engine does (naming the job its context
// carries).
type rolloutExec struct {
	gateExec
	rec release.Recorder
}

func (r *rolloutExec) Execute(ctx context.Context, instance string, spec release.Spec, typ history.Type, o release.ExecOptions) (*release.Result, error) {
	id, _ := platform.ParseID("prod:deployment/web")
	plan := &release.Plan{Items: []release.Item{{Service: id, Action: release.Update, Updates: []release.ContainerUpdate{{Container: "app", Current: "reg/app:1", Target: "reg/app:2"}}}}}
	o.Report(release.Progress{Stage: release.StageCommitting, Plan: plan})
	o.Report(release.Progress{Stage: release.StageRollingOut, Commit: "c0ffee"})
	o.Report(release.Progress{Stage: release.StageRollingOut, Commit: "c0ffee"}) // progress: no second notice
	ev := release.NewEvent(instance, spec, plan, typ, o.Started)
	ev.Commit, ev.Job = "c0ffee", release.JobID(ctx)
	if _, err := r.rec.Record(ctx, ev); err != nil {
		return nil, err
	}
	return &release.Result{Plan: plan, Commit: "c0ffee"}, nil
}

// TestJobNoticesNameTheJob: a job whose release starts rolling out
// stores one "started" notice (commit, services, image changes, job),
// and the event the release records is noticed with the job's ID.
func TestJobNoticesNameTheJob(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	exec := &rolloutExec{rec: store}
	q := NewQueue(exec, store, 0, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	q.NotifyStarts(store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	id, _ := platform.ParseID("prod:deployment/web")
	u, err := q.Enqueue(ctx, "team", release.Spec{Services: []platform.ID{id}, User: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, q, "team", u.Job.ID, history.JobSucceeded)
	notices, err := store.Notices(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(notices) != 2 {
		t.Fatalf("%d notices, want 2 (started, then the release): %+v", len(notices), notices)
	}
	st, done := notices[0], notices[1]
	if !st.Started || st.Event.Commit != "c0ffee" || st.Event.Job != u.Job.ID || st.Event.User != "ann" || st.Event.Type != history.Release ||
		len(st.Event.Changes) != 1 || st.Event.Changes[0].To != "reg/app:2" || len(st.Event.Services) != 1 {
		t.Errorf("the started notice: %+v", st)
	}
	if done.Started || done.Event.Job != u.Job.ID || done.Event.ID == 0 {
		t.Errorf("the release's notice: %+v; want its history row and the job %s", done, u.Job.ID)
	}
}
