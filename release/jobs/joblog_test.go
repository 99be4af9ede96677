package jobs

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// A job's log is written as it runs (told to OnLog and stored), says each
// step in words, and is read back, all or from a line on, after the job
// ended; another instance cannot read it.
func TestJobLogIsWrittenAndKept(t *testing.T) {
	q, g, _ := newQueue(t)
	var mu sync.Mutex
	var told []history.JobLogLine
	var updates int
	q.OnLog(func(l history.JobLogLine) { mu.Lock(); told = append(told, l); mu.Unlock() })
	q.OnUpdate(func(JobUpdate) { mu.Lock(); updates++; mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	u, err := q.Enqueue(ctx, "a", release.Spec{Message: "one", User: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	close(g.release)
	waitState(t, q, "a", u.Job.ID, history.JobSucceeded)

	lines, err := q.JobLog(ctx, "a", u.Job.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Errorf("line %d has seq %d", i, l.Seq)
		}
		text = append(text, l.Text)
	}
	want := []string{"queued by ann at position 1", "editing the manifests", "done: commit commit-one released"}
	if strings.Join(text, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(text, "\n"), strings.Join(want, "\n"))
	}
	mu.Lock()
	if len(told) != len(lines) || updates == 0 {
		t.Errorf("OnLog was told %d lines of %d, OnUpdate %d updates", len(told), len(lines), updates)
	}
	mu.Unlock()
	if rest, err := q.JobLog(ctx, "a", u.Job.ID, 2); err != nil || len(rest) != 1 || rest[0].Seq != 3 {
		t.Errorf("log after line 2: %v, %v", rest, err)
	}
	if _, err := q.JobLog(ctx, "b", u.Job.ID, 0); err == nil {
		t.Error("another instance read the job's log")
	}
}

// A progress report adds to the log only what changed: a new stage, the
// plan's changes, the pushed commit, a workload's new replica counts.
func TestProgressLines(t *testing.T) {
	t.Parallel()
	var l jobLog
	id := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	plan := &release.Plan{Items: []release.Item{{Service: id, Action: release.Update, Updates: []release.ContainerUpdate{{Container: "app", Current: "r/web:1", Target: "r/web:2"}}}}}
	steps := []struct {
		p    release.Progress
		want []string
	}{
		{release.Progress{Stage: release.StageCloning}, []string{"fetching the git remote and planning the release"}},
		{release.Progress{Stage: release.StageCommitting, Plan: plan}, []string{"committing", "default:deployment/web: container app: r/web:1 -> r/web:2"}},
		{release.Progress{Stage: release.StageApplying, Commit: "0123456789abcdef"}, []string{"pushed commit 0123456789ab", "applying to the cluster"}},
		{release.Progress{Stage: release.StageRollingOut, Commit: "0123456789abcdef", Workloads: []release.WorkloadProgress{{Service: id, Replicas: platform.Replicas{Desired: 2, Updated: 1}}}},
			[]string{"following the rollout", "default:deployment/web: 1/2 updated, 0 ready, 0 available"}},
		{release.Progress{Stage: release.StageRollingOut, Commit: "0123456789abcdef", Workloads: []release.WorkloadProgress{{Service: id, Replicas: platform.Replicas{Desired: 2, Updated: 1}}}}, nil},
		{release.Progress{Stage: release.StageRollingOut, Workloads: []release.WorkloadProgress{{Service: id, Replicas: platform.Replicas{Desired: 2, Updated: 2, Ready: 2, Available: 2}, Done: true}}},
			[]string{"default:deployment/web: rolled out (2/2 ready)"}},
	}
	for i, s := range steps {
		if got := l.progressLines(s.p); strings.Join(got, "|") != strings.Join(s.want, "|") {
			t.Errorf("step %d: %q, want %q", i, got, s.want)
		}
	}
}

// The log names, when the job commits, the workloads it applies (what a
// take-over or a rollback applies too), and says why a job that
// succeeded applied nothing.
func TestJobLogNamesTheTargetsAndWhyNothingWasApplied(t *testing.T) {
	web := platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}
	pol := platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "web"}
	var l jobLog
	got := l.progressLines(release.Progress{Stage: release.StageCommitting, Plan: &release.Plan{Targeted: true, Items: []release.Item{{
		Service: pol, Action: release.Update,
		Updates: []release.ContainerUpdate{{Container: "apps/kustomization.yaml:Kustomization:images[0].newTag", Current: "reg/web:1.0", Target: "reg/web:1.2"}},
		Targets: []release.Target{{Workload: web, File: "apps/kustomization.yaml", Format: release.TargetMarked}},
	}}}})
	want := "flux-system:imagepolicy/web: applies default:deployment/web (marked field, apps/kustomization.yaml)"
	if !strings.Contains(strings.Join(got, "\n"), want) {
		t.Errorf("log lines at commit:\n%s\nwant a line %q", strings.Join(got, "\n"), want)
	}
	got = l.progressLines(release.Progress{Stage: release.StageDone, Note: release.NothingToApply})
	if strings.Join(got, "\n") != release.NothingToApply {
		t.Errorf("log lines at the end: %q; want %q", got, release.NothingToApply)
	}
}

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
