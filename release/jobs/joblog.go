package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// JobLogStore keeps jobs' log lines. A JobStore that is also a
// JobLogStore keeps every job's log; with one that is not, jobs run as
// before and their logs are only sent to OnLog.
type JobLogStore interface {
	AppendJobLog(ctx context.Context, l history.JobLogLine) error
	JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error)
}

// jobLog is a job's log as it is written: the progress already told, so
// that each report adds only what changed.
type jobLog struct {
	seq       int64
	stage     string
	commit    string
	workloads map[string]string
}

// OnUpdate sets a function called with every job update (state, stage,
// queue position, rollout progress), of every instance; the web page's
// live view. It must not block. Set it before Run.
func (q *Queue) OnUpdate(f func(JobUpdate)) { q.onUpdate = f }

// OnLog sets a function called with every job log line as it is
// written. It must not block. Set it before Run.
func (q *Queue) OnLog(f func(history.JobLogLine)) { q.onLog = f }

// JobLog returns one of instance's job's log lines after seq after.
func (q *Queue) JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error) {
	ls, ok := q.store.(JobLogStore)
	if !ok {
		return nil, fluxerr.New(fluxerr.Precondition, errors.New("job logs are not implemented for this history store"), "Job logs are kept in the SQLite history store.")
	}
	if _, err := q.Get(ctx, instance, id); err != nil {
		return nil, err
	}
	return ls.JobLog(ctx, instance, id, after)
}

// progressLines says in words what a progress report adds to the job's
// log: a new stage, the plan being committed, the commit pushed, each
// workload's replicas as they change.
func (l *jobLog) progressLines(p release.Progress) []string {
	var out []string
	if p.Commit != "" && p.Commit != l.commit {
		l.commit = p.Commit
		out = append(out, fmt.Sprintf("pushed commit %.12s", p.Commit))
	}
	if p.Stage != l.stage {
		l.stage = p.Stage
		switch p.Stage {
		case release.StageCloning:
			out = append(out, "fetching the git remote and planning the release")
		case release.StageEditing:
			out = append(out, "editing the manifests")
		case release.StageCommitting:
			out = append(out, "committing")
		case release.StagePushing:
			out = append(out, "pushing the commit")
		case release.StageApplying:
			out = append(out, "applying to the cluster")
		case release.StageRollingOut:
			out = append(out, "following the rollout")
		case release.StageRollingBack:
			out = append(out, fmt.Sprintf("rolling back commit %.12s", p.Commit))
		case release.StageDone:
		default:
			out = append(out, p.Stage)
		}
	}
	if p.Plan != nil && p.Stage == release.StageCommitting {
		for _, it := range p.Plan.Items {
			for _, u := range it.Updates {
				out = append(out, fmt.Sprintf("%s: container %s: %s -> %s", it.Service, u.Container, u.Current, u.Target))
			}
			// What a take-over or a rollback of this job applies.
			for _, t := range it.Targets {
				out = append(out, fmt.Sprintf("%s: applies %s", it.Service, t))
			}
		}
	}
	if p.Note != "" {
		out = append(out, p.Note)
	}
	for _, w := range p.Workloads {
		r := w.Replicas
		s := fmt.Sprintf("%s: %d/%d updated, %d ready, %d available", w.Service, r.Updated, r.Desired, r.Ready, r.Available)
		if w.Done {
			s = fmt.Sprintf("%s: rolled out (%d/%d ready)", w.Service, r.Ready, r.Desired)
		}
		if l.workloads == nil {
			l.workloads = map[string]string{}
		}
		if l.workloads[w.Service.String()] != s {
			l.workloads[w.Service.String()] = s
			out = append(out, s)
		}
	}
	return out
}

// endLine is the job's last line.
func endLine(j history.Job) string {
	switch j.State {
	case history.JobSucceeded:
		if j.Commit == "" {
			return "done: nothing to change"
		}
		return fmt.Sprintf("done: commit %.12s released", j.Commit)
	case history.JobCancelled:
		return j.Error
	default:
		return "failed: " + j.Error
	}
}

// writeLog appends lines to e's log: stored when the store keeps logs,
// and told to OnLog.
func (q *Queue) writeLog(ctx context.Context, e *entry, lines ...string) {
	if len(lines) == 0 {
		return
	}
	ls, _ := q.store.(JobLogStore)
	q.mu.Lock()
	out := make([]history.JobLogLine, 0, len(lines))
	for _, text := range lines {
		e.log.seq++
		out = append(out, history.JobLogLine{JobID: e.job.ID, Instance: e.job.Instance, Seq: e.log.seq, Time: time.Now(), Stage: e.job.Stage, Text: text})
	}
	q.mu.Unlock()
	// The lines of one report are stored at once when the store can (a
	// release of many workloads reports many lines together).
	if b, ok := ls.(interface {
		AppendJobLogs(context.Context, []history.JobLogLine) error
	}); ok && len(out) > 1 {
		if err := b.AppendJobLogs(context.WithoutCancel(ctx), out); err != nil {
			q.log.Error("saving job log lines failed", "job", out[0].JobID, "error", err)
		}
		ls = nil
	}
	for _, l := range out {
		if ls != nil {
			if err := ls.AppendJobLog(context.WithoutCancel(ctx), l); err != nil {
				q.log.Error("saving a job log line failed", "job", l.JobID, "error", err)
			}
		}
		if q.onLog != nil {
			q.onLog(l)
		}
	}
}
