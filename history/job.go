package history

import (
	"errors"
	"time"
)

// ErrJobFinished is returned by SaveJob for a write that would change a
// finished job (to another state): a deposed leader's late write, which
// the store refuses so that a finished job stays finished.
var ErrJobFinished = errors.New("the job has finished already; this late write was not saved")

// FinishedStatesSQL is the SQL list of the Final states, for the stores'
// fence on SaveJob.
const FinishedStatesSQL = `('succeeded', 'failed', 'cancelled')`

// JobState is where a job is in its life.
type JobState string

// The job states. Queued and Running are live; the rest are final.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Final reports whether a job in this state will not change again.
func (s JobState) Final() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// Job is a release execution, queued and run one at a time. Spec and
// Plan are JSON documents owned by the release package.
type Job struct {
	ID       string
	Instance string
	State    JobState
	// Stage is the step running now: queued, cloning, editing,
	// committing, pushing, applying, rolling out, rolling back, done.
	Stage  string
	Spec   []byte
	Plan   []byte
	Commit string
	Error  string
	// Checksum is the plan checksum the job was confirmed with, if any.
	Checksum string
	// Seq orders jobs by creation.
	Seq        int64
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}
