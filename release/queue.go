package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

// Executor executes a release; *Engine is one.
type Executor interface {
	Execute(ctx context.Context, instance string, spec Spec, typ history.Type, o ExecOptions) (*Result, error)
}

// JobUpdate is a job as it is now, sent to watchers on every change.
type JobUpdate struct {
	Job history.Job
	// Position is the job's place in the queue, 1 for the next to run;
	// 0 once it runs or has ended.
	Position  int
	Workloads []WorkloadProgress
}

// Queue runs release jobs one at a time, in the order they came, for all
// instances: only one release deploys at a time. Jobs are stored, so they
// are reported after a restart; a job that was running when fluxd stopped
// is marked failed ("daemon restarted"), since fluxd cannot know how far
// it got, and queued jobs are queued again.
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
}

// OnEnd sets a function called after every job ends (the automator's
// kick). Set it before Run.
func (q *Queue) OnEnd(f func(history.Job)) { q.onEnd = f }

type entry struct {
	job       history.Job
	spec      Spec
	checksum  string
	cancel    context.CancelFunc
	cancelled bool
	workloads []WorkloadProgress
}

// NewQueue returns a Queue. rolloutTimeout bounds each job's rollout
// (zero: jobs end at apply, without following the rollout) unless its
// spec sets one; rollback is the default of RollbackOnFailure.
func NewQueue(exec Executor, store JobStore, rolloutTimeout time.Duration, rollback bool, log *slog.Logger) *Queue {
	return &Queue{exec: exec, store: store, rolloutTimeout: rolloutTimeout, rollback: rollback, log: log.With("component", "jobs"),
		subs: map[string]map[chan JobUpdate]struct{}{}, wake: make(chan struct{}, 1)}
}

// Recover settles the jobs a previous run of fluxd left live.
func (q *Queue) Recover(ctx context.Context) error {
	live, err := q.store.LiveJobs(ctx)
	if err != nil {
		return err
	}
	for _, j := range live {
		if j.State == history.JobRunning {
			j.State, j.Stage, j.Error, j.FinishedAt = history.JobFailed, StageFailed, "daemon restarted while the job was running; check the cluster and git, then release again", time.Now()
			if _, err := q.store.SaveJob(ctx, j); err != nil {
				return err
			}
			q.record(ctx, j, history.Failed)
			q.log.Warn("job was running when fluxd stopped; marked failed", "job", j.ID)
			continue
		}
		var spec Spec
		if err := json.Unmarshal(j.Spec, &spec); err != nil {
			return fmt.Errorf("job %s: reading its spec: %w", j.ID, err)
		}
		q.mu.Lock()
		q.pending = append(q.pending, &entry{job: j, spec: spec})
		q.mu.Unlock()
		q.log.Info("job queued again after a restart", "job", j.ID)
	}
	q.poke()
	return nil
}

// Enqueue adds a release job for instance and returns it at once.
// checksum, when set, must still match when the job runs.
func (q *Queue) Enqueue(ctx context.Context, instance string, spec Spec, checksum string) (JobUpdate, error) {
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return JobUpdate{}, err
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	j := history.Job{ID: hex.EncodeToString(raw[:]), Instance: instance, State: history.JobQueued, Stage: StageQueued, Spec: specJSON, CreatedAt: time.Now()}
	if j.Seq, err = q.store.SaveJob(ctx, j); err != nil {
		return JobUpdate{}, err
	}
	q.mu.Lock()
	e := &entry{job: j, spec: spec, checksum: checksum}
	q.pending = append(q.pending, e)
	u := q.updateLocked(e)
	q.mu.Unlock()
	q.log.Info("job queued", "job", j.ID, "instance", instance, "position", u.Position)
	q.poke()
	return u, nil
}

func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run executes queued jobs one at a time until ctx ends.
func (q *Queue) Run(ctx context.Context) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		e := q.pending[0]
		q.pending = q.pending[1:]
		jobCtx, cancel := context.WithCancel(ctx)
		e.cancel = cancel
		e.job.State, e.job.Stage, e.job.StartedAt = history.JobRunning, StageCloning, time.Now()
		q.running = e
		q.mu.Unlock()
		q.save(ctx, e)
		q.publishAll()
		q.runJob(jobCtx, e)
		cancel()
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
	res, err := q.exec.Execute(ctx, e.job.Instance, e.spec, typ, ExecOptions{
		Checksum:          e.checksum,
		RolloutTimeout:    timeout,
		RollbackOnFailure: q.rollback || e.spec.RollbackOnFailure,
		Report: func(p Progress) {
			q.mu.Lock()
			changed := e.job.Stage != p.Stage || (p.Commit != "" && e.job.Commit != p.Commit)
			e.job.Stage = p.Stage
			if p.Commit != "" {
				e.job.Commit = p.Commit
			}
			if p.Workloads != nil {
				e.workloads = p.Workloads
			}
			q.mu.Unlock()
			if changed {
				q.save(context.WithoutCancel(ctx), e)
			}
			q.publish(e)
		},
	})
	q.mu.Lock()
	e.job.FinishedAt = time.Now()
	switch {
	case err != nil && e.cancelled:
		e.job.State, e.job.Stage, e.job.Error = history.JobCancelled, StageFailed, "cancelled: "+err.Error()
	case err != nil:
		e.job.State, e.job.Stage, e.job.Error = history.JobFailed, StageFailed, err.Error()
	default:
		e.job.State, e.job.Stage, e.job.Commit = history.JobSucceeded, StageDone, res.Commit
		if b, err := json.Marshal(res.Plan); err == nil {
			e.job.Plan = b
		}
	}
	q.running = nil
	q.mu.Unlock()
	q.save(context.WithoutCancel(ctx), e)
	q.log.Info("job ended", "job", e.job.ID, "state", string(e.job.State), "commit", e.job.Commit, "error", e.job.Error)
	q.publish(e)
	q.closeSubs(e.job.ID)
	if q.onEnd != nil {
		q.onEnd(e.job)
	}
}

// record notes a job's end in history, where the engine did not.
func (q *Queue) record(ctx context.Context, j history.Job, typ history.Type) {
	var spec Spec
	_ = json.Unmarshal(j.Spec, &spec)
	ev := history.Event{Instance: j.Instance, Type: typ, User: spec.User, Message: spec.Message, Error: fmt.Sprintf("job %s: %s", j.ID, j.Error), StartedAt: j.CreatedAt, EndedAt: time.Now()}
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
	if _, err := q.store.SaveJob(ctx, j); err != nil {
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
			e.job.State, e.job.Stage, e.job.FinishedAt, e.job.Error = history.JobCancelled, StageFailed, time.Now(), "cancelled while queued"
			q.mu.Unlock()
			q.save(ctx, e)
			q.record(ctx, e.job, history.Cancelled)
			q.publish(e)
			q.closeSubs(id)
			q.publishAll()
			return JobUpdate{Job: e.job}, nil
		}
	}
	if e := q.running; e != nil && e.job.ID == id && e.job.Instance == instance {
		e.cancelled = true
		e.cancel()
		u := q.updateLocked(e)
		q.mu.Unlock()
		return u, nil
	}
	q.mu.Unlock()
	u, err := q.Get(ctx, instance, id)
	if err != nil {
		return JobUpdate{}, err
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
	u := JobUpdate{Job: e.job, Workloads: append([]WorkloadProgress(nil), e.workloads...)}
	for i, p := range q.pending {
		if p == e {
			u.Position = i + 1
		}
	}
	return u
}

// publish sends the entry's state to its watchers, dropping an update
// for a watcher too slow to take it rather than blocking the job.
func (q *Queue) publish(e *entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.updateLocked(e)
	for ch := range q.subs[e.job.ID] {
		select {
		case ch <- u:
		default:
		}
	}
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
