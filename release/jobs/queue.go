package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// JobStore keeps jobs, so that they are reported after a restart.
type JobStore interface {
	SaveJob(ctx context.Context, j history.Job) (int64, error)
	Job(ctx context.Context, instance, id string) (history.Job, error)
	Jobs(ctx context.Context, instance string, limit int) ([]history.Job, error)
	LiveJobs(ctx context.Context) ([]history.Job, error)
	Record(ctx context.Context, ev history.Event) (int64, error)
}

// Executor executes a release, or finishes one another fluxd pushed;
// *Engine is one.
type Executor interface {
	Execute(ctx context.Context, instance string, spec release.Spec, typ history.Type, o release.ExecOptions) (*release.Result, error)
	Resume(ctx context.Context, instance string, spec release.Spec, plan *release.Plan, commit string, typ history.Type, o release.ExecOptions) (*release.Result, error)
	FindJobCommit(ctx context.Context, id string) (string, error)
}

var _ Executor = (*release.Engine)(nil)

// JobUpdate is a job as it is now, sent to watchers on every change.
type JobUpdate struct {
	Job history.Job
	// Position is the job's place in the queue, 1 for the next to run;
	// 0 once it runs or has ended.
	Position  int
	Workloads []release.WorkloadProgress
}

// Queue runs release jobs one at a time, in the order they came, for all
// instances: only one release deploys at a time. Jobs are stored, so that
// a fluxd that starts (a restart, or a replica taking over from a leader
// that died) carries on with them: see Recover.
type Queue struct {
	exec           Executor
	store          JobStore
	rolloutTimeout time.Duration
	rollback       bool
	log            *slog.Logger

	mu      sync.Mutex
	pending []*entry
	running *entry
	subs    map[string]map[chan JobUpdate]struct{}
	wake    chan struct{}
	onEnd   func(history.Job)
	metrics *Metrics // nil: none
	// ended counts the jobs that ended (Ended).
	ended atomic.Uint64

	onUpdate func(JobUpdate)
	onLog    func(history.JobLogLine)

	// known are the jobs this queue has taken in (enqueued, recovered or
	// adopted), so that adopt never takes one twice.
	known map[string]bool
	// stopped is set once Run has returned (fluxd stops, or this replica
	// stepped down): jobs enqueued then are only stored, for the leader.
	stopped bool
	// adoptEvery is how often Run looks in the store for queued jobs it
	// does not hold (see adopt).
	adoptEvery time.Duration

	notifier Notifier // nil: none

	// cluster names the cluster this queue's jobs deploy to (SetCluster):
	// it prefixes their IDs, and Recover and adopt take only its jobs.
	cluster string
}

// SetCluster names the cluster this queue's fluxd deploys to, when
// fluxds of several clusters share one store (--cluster-name): a job's
// ID is then "NAME.<hex>", and Recover and adopt take in only the jobs
// of this cluster, never another cluster's, which another fluxd runs
// against another API server. Without a name (one cluster), IDs are bare
// and only bare IDs are taken in. Set it before Recover and Run.
func (q *Queue) SetCluster(name string) { q.cluster = name }

// ClusterOf is the cluster a job ID was made for: the part before its
// last ".", or "" for a bare ID.
func ClusterOf(id string) string {
	if i := strings.LastIndex(id, "."); i >= 0 {
		return id[:i]
	}
	return ""
}

// ours says whether a stored job is this queue's to run.
func (q *Queue) ours(j history.Job) bool { return ClusterOf(j.ID) == q.cluster }

// OnEnd sets a function called after every job ends (the automator's
// kick). Set it before Run.
func (q *Queue) OnEnd(f func(history.Job)) { q.onEnd = f }

// Ended counts the jobs this queue ended. It moves before a job's end is
// published, so that whoever learns of the end and reads the services
// next sees the cluster as the job left it (daemon's view).
func (q *Queue) Ended() uint64 { return q.ended.Load() }

type entry struct {
	job       history.Job
	spec      release.Spec
	checksum  string
	cancel    context.CancelCauseFunc
	cancelled bool
	workloads []release.WorkloadProgress
	// resume is set for a job another fluxd pushed and did not finish.
	resume *resumePoint
	// log is what the job's log has told so far.
	log jobLog
	// startNoticed: the notice of its rollout's start is stored.
	startNoticed bool
}

type resumePoint struct {
	commit string
	plan   *release.Plan
	// rollingBack: the job was rolling its release back.
	rollingBack bool
	// rolloutStarted is when the job's log says its rollout began (zero
	// if it had not, or the store keeps no logs).
	rolloutStarted time.Time
}

// NewQueue returns a Queue. rolloutTimeout bounds each job's rollout
// (zero: jobs end at apply, without following the rollout) unless its
// spec sets one; rollback is the default of RollbackOnFailure.
func NewQueue(exec Executor, store JobStore, rolloutTimeout time.Duration, rollback bool, log *slog.Logger) *Queue {
	return &Queue{exec: exec, store: store, rolloutTimeout: rolloutTimeout, rollback: rollback, log: log.With("component", "jobs"),
		subs: map[string]map[chan JobUpdate]struct{}{}, wake: make(chan struct{}, 1), known: map[string]bool{}, adoptEvery: 5 * time.Second}
}

// Recover carries on with the jobs a previous fluxd left live (this one
// before a restart, or a leader that died), before any new job:
//   - a job that was running and had pushed (its commit is saved, or its
//     trailer is found in git) is taken over: applied as git has it and
//     followed, never committed again;
//   - a job that was running and had not pushed runs again from the start;
//   - queued jobs are queued again, in order.
//
// A running job whose push cannot be told (git unreachable) is failed
// rather than risk releasing twice.
func (q *Queue) Recover(ctx context.Context) error {
	live, err := q.store.LiveJobs(ctx)
	if err != nil {
		return err
	}
	var first, rest []*entry
	q.mu.Lock()
	for _, j := range live {
		q.known[j.ID] = true
	}
	q.mu.Unlock()
	for _, j := range live {
		if !q.ours(j) {
			q.log.Info("a live job of another cluster's fluxd is left to it", "job", j.ID, "cluster", ClusterOf(j.ID))
			continue
		}
		var spec release.Spec
		if err := json.Unmarshal(j.Spec, &spec); err != nil {
			return fmt.Errorf("job %s: reading its spec: %w", j.ID, err)
		}
		e := &entry{job: j, spec: spec, checksum: j.Checksum}
		var rolloutStarted time.Time
		if ls, ok := q.store.(JobLogStore); ok {
			// Carry on numbering the log the previous fluxd wrote.
			if lines, err := ls.JobLog(ctx, j.Instance, j.ID, 0); err == nil && len(lines) > 0 {
				e.log.seq = lines[len(lines)-1].Seq
				rolloutStarted = rolloutStart(lines)
			}
		}
		if j.State != history.JobRunning {
			rest = append(rest, e)
			q.log.Info("job queued again", "job", j.ID)
			continue
		}
		commit := j.Commit
		if commit == "" {
			if commit, err = q.exec.FindJobCommit(ctx, j.ID); err != nil {
				q.failStale(ctx, j, fmt.Sprintf("fluxd stopped while the job was running, and whether it had pushed cannot be told (%v); check git and the cluster, then release again", err))
				continue
			}
		}
		if commit == "" {
			e.job.State, e.job.Stage = history.JobQueued, release.StageQueued
			first = append(first, e)
			q.log.Warn("job was running when its fluxd stopped, before it pushed; running it again", "job", j.ID)
			continue
		}
		var plan release.Plan
		if err := json.Unmarshal(j.Plan, &plan); err != nil || len(plan.Items) == 0 {
			q.failStale(ctx, j, fmt.Sprintf("fluxd stopped after the job pushed commit %.12s, but its plan was not saved; check the cluster, then release again", commit))
			continue
		}
		e.job.Commit, e.resume = commit, &resumePoint{commit: commit, plan: &plan, rollingBack: j.Stage == release.StageRollingBack, rolloutStarted: rolloutStarted}
		first = append(first, e)
		if e.resume.rollingBack {
			q.log.Warn("job was rolling back when its fluxd stopped; taking it over: finishing the rollback", "job", j.ID, "commit", commit)
			continue
		}
		q.log.Warn("job was running when its fluxd stopped, after it pushed; taking it over: applying and following its rollout", "job", j.ID, "commit", commit)
	}
	q.mu.Lock()
	q.pending = append(append(first, rest...), q.pending...)
	q.mu.Unlock()
	q.poke()
	return nil
}

// adopt takes in the queued jobs of the store that this queue does not
// hold: a job a stepping-down leader accepted and stored after this
// replica's Recover had read the store. Without it, no replica would ever
// run such a job. Only queued jobs are adopted; a running one is its
// runner's, or Recover's at the next start.
func (q *Queue) adopt(ctx context.Context) {
	live, err := q.store.LiveJobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("looking for queued jobs another fluxd stored failed", "error", err)
		}
		return
	}
	var took []*entry
	q.mu.Lock()
	for _, j := range live {
		if j.State != history.JobQueued || q.known[j.ID] || !q.ours(j) {
			continue
		}
		var spec release.Spec
		if err := json.Unmarshal(j.Spec, &spec); err != nil {
			q.log.Error("a queued job's spec cannot be read; it is left as it is", "job", j.ID, "error", err)
			q.known[j.ID] = true
			continue
		}
		q.known[j.ID] = true
		e := &entry{job: j, spec: spec, checksum: j.Checksum}
		q.pending = append(q.pending, e)
		took = append(took, e)
	}
	q.mu.Unlock()
	for _, e := range took {
		q.log.Warn("took in a job another fluxd accepted as it stepped down", "job", e.job.ID, "instance", e.job.Instance)
		q.writeLog(ctx, e, "taken in by this fluxd: the fluxd that accepted it stepped down")
		q.publish(e)
	}
	if len(took) > 0 {
		q.poke()
	}
}

// stop ends Run's hold on the queue: the jobs still queued stay in the
// store, for whoever leads next; this replica forgets them.
func (q *Queue) stop() {
	q.mu.Lock()
	q.stopped = true
	left := q.pending
	q.pending = nil
	for _, e := range left {
		delete(q.known, e.job.ID)
	}
	q.mu.Unlock()
	for _, e := range left {
		q.closeSubs(e.job.ID)
	}
}

// rolloutStart is when a job's log first reached the rollout: the time
// its rollout timeout runs from, however often it is taken over.
func rolloutStart(lines []history.JobLogLine) time.Time {
	for _, l := range lines {
		if l.Stage == release.StageRollingOut {
			return l.Time
		}
	}
	return time.Time{}
}

// failStale marks a job that cannot be carried on failed, in history too.
func (q *Queue) failStale(ctx context.Context, j history.Job, why string) {
	j.State, j.Stage, j.Error, j.FinishedAt = history.JobFailed, release.StageFailed, why, time.Now()
	if _, err := q.store.SaveJob(ctx, j); err != nil {
		q.log.Error("saving job failed", "job", j.ID, "error", err)
	}
	q.record(ctx, j, history.Failed)
	q.log.Warn("job failed: "+why, "job", j.ID)
}

// Enqueue adds a release job for instance and returns it at once.
// checksum, when set, must still match when the job runs.
func (q *Queue) Enqueue(ctx context.Context, instance string, spec release.Spec, checksum string) (JobUpdate, error) {
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return JobUpdate{}, err
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	if q.cluster != "" {
		id = q.cluster + "." + id
	}
	j := history.Job{ID: id, Instance: instance, State: history.JobQueued, Stage: release.StageQueued, Spec: specJSON, Checksum: checksum, CreatedAt: time.Now()}
	q.mu.Lock()
	q.known[j.ID] = true
	q.mu.Unlock()
	if j.Seq, err = q.store.SaveJob(ctx, j); err != nil {
		return JobUpdate{}, err
	}
	q.mu.Lock()
	e := &entry{job: j, spec: spec, checksum: checksum}
	if q.stopped {
		// This replica stepped down (or fluxd is stopping) while the
		// call was accepted: the stored job is the leader's to run (its
		// adopt finds it), or the next fluxd's (Recover).
		delete(q.known, j.ID)
		q.mu.Unlock()
		q.log.Warn("job stored for the leader: this fluxd no longer runs jobs", "job", j.ID, "instance", instance)
		u := JobUpdate{Job: j}
		q.publishUpdate(u)
		return u, nil
	}
	q.pending = append(q.pending, e)
	u := q.updateLocked(e)
	q.mu.Unlock()
	q.log.Info("job queued", "job", j.ID, "instance", instance, "position", u.Position)
	q.writeLog(ctx, e, fmt.Sprintf("queued by %s at position %d", orSomeone(spec.User), u.Position))
	q.publishUpdate(u)
	q.poke()
	return u, nil
}

func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run executes queued jobs one at a time until ctx ends. Meanwhile it
// adopts the queued jobs that another fluxd stored and will not run (see
// adopt). When it returns, the jobs still queued are left in the store.
func (q *Queue) Run(ctx context.Context) {
	q.mu.Lock()
	q.stopped = false
	q.mu.Unlock()
	defer q.stop()
	adopt := time.NewTicker(q.adoptEvery)
	defer adopt.Stop()
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			case <-adopt.C:
				q.adopt(ctx)
				continue
			}
		}
		e := q.pending[0]
		q.pending = q.pending[1:]
		jobCtx, cancel := context.WithCancelCause(ctx)
		e.cancel = cancel
		jobCtx = release.WithRoot(jobCtx, ctx)
		e.job.State = history.JobRunning
		if e.resume == nil {
			e.job.Stage, e.job.StartedAt = release.StageCloning, time.Now()
		}
		q.running = e
		q.mu.Unlock()
		q.save(ctx, e)
		q.publishAll()
		q.runJob(jobCtx, e)
		cancel(nil)
		if ctx.Err() != nil {
			return
		}
	}
}

func (q *Queue) runJob(ctx context.Context, e *entry) {
	timeout := q.rolloutTimeout
	if e.spec.RolloutTimeout > 0 {
		timeout = e.spec.RolloutTimeout
	}
	typ := history.Release
	if e.spec.Automated {
		typ = history.AutomatedRelease
	}
	timer := q.startTimer(e, typ)
	o := release.ExecOptions{
		Checksum:          e.checksum,
		RolloutTimeout:    timeout,
		RollbackOnFailure: q.rollback || e.spec.RollbackOnFailure,
		JobID:             e.job.ID,
		Report: func(p release.Progress) {
			timer.stage(p.Stage)
			q.mu.Lock()
			lines := e.log.progressLines(p)
			changed := e.job.Stage != p.Stage || (p.Commit != "" && e.job.Commit != p.Commit) || p.Plan != nil
			e.job.Stage = p.Stage
			if p.Commit != "" {
				e.job.Commit = p.Commit
			}
			if p.Plan != nil {
				if b, err := json.Marshal(p.Plan); err == nil {
					e.job.Plan = b
				}
			}
			if p.Workloads != nil {
				e.workloads = p.Workloads
			}
			q.mu.Unlock()
			if changed {
				q.save(context.WithoutCancel(ctx), e)
			}
			q.writeLog(ctx, e, lines...)
			q.publish(e)
			if p.Stage == release.StageRollingOut && p.Commit != "" {
				q.noticeStarted(ctx, e, typ, p.Commit)
			}
		},
	}
	var res *release.Result
	var err error
	ctx = release.WithJob(ctx, e.job.ID)
	if e.resume != nil {
		q.writeLog(ctx, e, fmt.Sprintf("taken over by this fluxd after commit %.12s was pushed", e.resume.commit))
		// The log has told the push already: this fluxd pushes nothing.
		q.mu.Lock()
		e.log.commit = e.resume.commit
		q.mu.Unlock()
	}
	if r := e.resume; r != nil {
		o.RollingBack, o.Started, o.RolloutStarted = r.rollingBack, e.job.StartedAt, r.rolloutStarted
		res, err = q.exec.Resume(ctx, e.job.Instance, e.spec, r.plan, r.commit, typ, o)
	} else {
		res, err = q.exec.Execute(ctx, e.job.Instance, e.spec, typ, o)
	}
	if errors.Is(err, release.ErrInterrupted) {
		// fluxd is stopping: the stored job stays running (with its
		// commit and plan if it pushed), for Recover to carry on.
		q.mu.Lock()
		q.running = nil
		q.mu.Unlock()
		q.log.Info("fluxd is stopping: job left live for the next fluxd", "job", e.job.ID, "stage", e.job.Stage, "commit", e.job.Commit)
		q.writeLog(ctx, e, "fluxd is stopping: the job is left for the next fluxd to carry on")
		q.closeSubs(e.job.ID)
		return
	}
	q.mu.Lock()
	e.job.FinishedAt = time.Now()
	switch {
	case err != nil && e.cancelled:
		e.job.State, e.job.Stage, e.job.Error = history.JobCancelled, release.StageCancelled, "cancelled: "+err.Error()
	case err != nil:
		e.job.State, e.job.Stage, e.job.Error = history.JobFailed, release.StageFailed, err.Error()
	default:
		e.job.State, e.job.Stage, e.job.Commit = history.JobSucceeded, release.StageDone, res.Commit
		if res.NotRolledOut != "" {
			e.job.Stage, e.job.Error = release.StageNotRolledOut, res.NotRolledOut
		}
		if b, err := json.Marshal(res.Plan); err == nil {
			e.job.Plan = b
		}
	}
	q.mu.Unlock()
	timer.end(e.job.State)
	// Saved before the job leaves q.running: a read in between finds its
	// end in one place or the other, never "running" in the store alone.
	q.save(context.WithoutCancel(ctx), e)
	q.mu.Lock()
	q.running = nil
	q.mu.Unlock()
	q.ended.Add(1)
	q.log.Info("job ended", "job", e.job.ID, "state", string(e.job.State), "commit", e.job.Commit, "error", e.job.Error)
	q.writeLog(ctx, e, endLine(e.job))
	q.publish(e)
	q.closeSubs(e.job.ID)
	if q.onEnd != nil {
		q.onEnd(e.job)
	}
}

// record notes a job's end in history, where the engine did not.
func (q *Queue) record(ctx context.Context, j history.Job, typ history.Type) {
	var spec release.Spec
	_ = json.Unmarshal(j.Spec, &spec)
	ev := history.Event{Instance: j.Instance, Type: typ, User: spec.User, Message: spec.Message, Error: fmt.Sprintf("job %s: %s", j.ID, j.Error), Job: j.ID, StartedAt: j.CreatedAt, EndedAt: time.Now()}
	for _, id := range spec.Services {
		ev.Services = append(ev.Services, id.String())
	}
	if _, err := q.store.Record(ctx, ev); err != nil {
		q.log.Error("recording a job in history failed", "job", j.ID, "error", err)
	}
}

func (q *Queue) save(ctx context.Context, e *entry) {
	q.mu.Lock()
	j := e.job
	q.mu.Unlock()
	if _, err := q.store.SaveJob(ctx, j); errors.Is(err, history.ErrJobFinished) {
		// Another leader finished it while this one still ran it (this
		// replica was deposed): the store kept the finished job.
		q.log.Warn("job was finished by another fluxd; this replica's late update was not saved", "job", j.ID, "state", j.State)
	} else if err != nil {
		q.log.Error("saving job failed", "job", j.ID, "error", err)
	}
}

// Get returns one of instance's jobs.
func (q *Queue) Get(ctx context.Context, instance, id string) (JobUpdate, error) {
	q.mu.Lock()
	if e := q.findLocked(id); e != nil && e.job.Instance == instance {
		u := q.updateLocked(e)
		q.mu.Unlock()
		return u, nil
	}
	q.mu.Unlock()
	j, err := q.store.Job(ctx, instance, id)
	if errors.Is(err, history.ErrNotFound) {
		return JobUpdate{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("there is no job %q", id), "'fluxctl jobs' lists recent jobs.")
	}
	if err != nil {
		return JobUpdate{}, err
	}
	return JobUpdate{Job: j}, nil
}

// List returns instance's recent jobs, newest first, live ones with their
// queue positions.
func (q *Queue) List(ctx context.Context, instance string, limit int) ([]JobUpdate, error) {
	jobs, err := q.store.Jobs(ctx, instance, limit)
	if err != nil {
		return nil, err
	}
	out := make([]JobUpdate, 0, len(jobs))
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range jobs {
		if e := q.findLocked(j.ID); e != nil {
			out = append(out, q.updateLocked(e))
			continue
		}
		out = append(out, JobUpdate{Job: j})
	}
	return out, nil
}

// Cancel cancels a queued job; stops a running one that has not pushed
// yet, with nothing pushed; or rolls back one that has pushed (a revert
// commit, re-applied and followed).
func (q *Queue) Cancel(ctx context.Context, instance, id string) (JobUpdate, error) {
	q.mu.Lock()
	for i, e := range q.pending {
		if e.job.ID == id && e.job.Instance == instance {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			e.job.State, e.job.Stage, e.job.FinishedAt, e.job.Error = history.JobCancelled, release.StageCancelled, time.Now(), "cancelled while queued"
			q.mu.Unlock()
			q.save(ctx, e)
			q.record(ctx, e.job, history.Cancelled)
			q.writeLog(ctx, e, e.job.Error)
			q.publish(e)
			q.closeSubs(id)
			q.publishAll()
			return JobUpdate{Job: e.job}, nil
		}
	}
	if e := q.running; e != nil && e.job.ID == id && e.job.Instance == instance {
		e.cancelled = true
		e.cancel(release.ErrCancelled)
		u := q.updateLocked(e)
		q.mu.Unlock()
		return u, nil
	}
	q.mu.Unlock()
	u, err := q.Get(ctx, instance, id)
	if err != nil {
		return JobUpdate{}, err
	}
	if c := ClusterOf(id); c != q.cluster && !u.Job.State.Final() {
		return JobUpdate{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("job %s is %s, and another cluster's fluxd (--cluster-name %q) runs it", id, u.Job.State, c),
			"Cancel it through the fluxd of that cluster (fluxctl --url).")
	}
	return JobUpdate{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("job %s has already ended (%s)", id, u.Job.State), "")
}

// Watch returns a channel of the job's updates: its state now, then every
// change, closed once the job has ended or ctx is done.
func (q *Queue) Watch(ctx context.Context, instance, id string) (<-chan JobUpdate, error) {
	first, err := q.Get(ctx, instance, id)
	if err != nil {
		return nil, err
	}
	ch := make(chan JobUpdate, 64)
	ch <- first
	if first.Job.State.Final() {
		close(ch)
		return ch, nil
	}
	q.mu.Lock()
	if e := q.findLocked(id); e == nil || e.job.State.Final() {
		q.mu.Unlock()
		// The job ended between the first read and now: its end is in
		// the store, and is what the watcher must see last.
		if last, err := q.Get(ctx, instance, id); err == nil && last.Job.State != first.Job.State {
			ch <- last
		}
		close(ch)
		return ch, nil
	}
	if q.subs[id] == nil {
		q.subs[id] = map[chan JobUpdate]struct{}{}
	}
	q.subs[id][ch] = struct{}{}
	q.mu.Unlock()
	go func() {
		<-ctx.Done()
		q.mu.Lock()
		if _, ok := q.subs[id][ch]; ok {
			delete(q.subs[id], ch)
			close(ch)
		}
		q.mu.Unlock()
	}()
	return ch, nil
}

func (q *Queue) findLocked(id string) *entry {
	if q.running != nil && q.running.job.ID == id {
		return q.running
	}
	for _, e := range q.pending {
		if e.job.ID == id {
			return e
		}
	}
	return nil
}

func (q *Queue) updateLocked(e *entry) JobUpdate {
	u := JobUpdate{Job: e.job, Workloads: append([]release.WorkloadProgress(nil), e.workloads...)}
	for i, p := range q.pending {
		if p == e {
			u.Position = i + 1
		}
	}
	return u
}

// publish sends the entry's state to its watchers without blocking the
// job: a watcher too slow to take it loses its oldest update instead, so
// that the newest (the job's end, last of all) is always there to read.
func (q *Queue) publish(e *entry) {
	q.mu.Lock()
	u := q.updateLocked(e)
	for ch := range q.subs[e.job.ID] {
		offer(ch, u)
	}
	q.mu.Unlock()
	q.publishUpdate(u)
}

// offer puts u in ch, dropping ch's oldest update if it is full. Only
// publish sends, under q.mu, so after one drop the send cannot block.
func offer(ch chan JobUpdate, u JobUpdate) {
	select {
	case ch <- u:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- u:
	default:
	}
}

func (q *Queue) publishUpdate(u JobUpdate) {
	if q.onUpdate != nil {
		q.onUpdate(u)
	}
}

func orSomeone(user string) string {
	if user == "" {
		return "someone"
	}
	return user
}

// publishAll tells every queued job's watchers their new positions.
func (q *Queue) publishAll() {
	q.mu.Lock()
	pending := append([]*entry(nil), q.pending...)
	q.mu.Unlock()
	for _, e := range pending {
		q.publish(e)
	}
}

func (q *Queue) closeSubs(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ch := range q.subs[id] {
		close(ch)
	}
	delete(q.subs, id)
}
