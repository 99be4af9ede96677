package history

import "time"

// JobLogLine is one line of a job's log: what the job did, as it did it
// (fetching, editing, commit, push, apply, each workload's rollout,
// rollback), kept after the job ends like a CI build's log.
type JobLogLine struct {
	JobID    string
	Instance string
	// Seq numbers the job's lines from 1, in the order they were written.
	Seq   int64
	Time  time.Time
	Stage string
	Text  string
}
