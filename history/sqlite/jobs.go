package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

const jobColumns = `seq, id, instance, state, stage, spec, plan, commit_id, error, created_at, started_at, finished_at, checksum`

// SaveJob inserts or updates a job, keyed by its ID, and returns its Seq.
// A finished job is not changed to another state (history.ErrJobFinished):
// a deposed leader's late write cannot move it back.
func (s *Store) SaveJob(ctx context.Context, j history.Job) (int64, error) {
	if j.Instance == "" || j.ID == "" {
		return 0, errors.New("saving a job without an ID or instance")
	}
	j = j.Clean()
	res, err := s.db.ExecContext(ctx, `
		INSERT INTO jobs (id, instance, state, stage, spec, plan, commit_id, error, created_at, started_at, finished_at, checksum)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, stage = excluded.stage, plan = excluded.plan,
			commit_id = excluded.commit_id, error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at
		WHERE jobs.state NOT IN `+history.FinishedStatesSQL+` OR jobs.state = excluded.state`,
		j.ID, j.Instance, string(j.State), j.Stage, string(orEmpty(j.Spec)), string(orEmpty(j.Plan)), j.Commit, j.Error,
		nanos(j.CreatedAt), nanos(j.StartedAt), nanos(j.FinishedAt), j.Checksum)
	if err != nil {
		return 0, fmt.Errorf("saving job %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		// The fence held: the row is finished in another state.
		return 0, fmt.Errorf("saving job %s: %w", j.ID, history.ErrJobFinished)
	}
	var seq int64
	if err := s.db.QueryRowContext(ctx, `SELECT seq FROM jobs WHERE id = ?`, j.ID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("saving job %s: %w", j.ID, err)
	}
	return seq, nil
}

// Job returns one of the instance's jobs, or history.ErrNotFound.
func (s *Store) Job(ctx context.Context, instance, id string) (history.Job, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE instance = ? AND id = ?`, instance, id)
	if err != nil {
		return history.Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return history.Job{}, err
	}
	if len(jobs) == 0 {
		return history.Job{}, fmt.Errorf("job %s: %w", id, history.ErrNotFound)
	}
	return jobs[0], nil
}

// Jobs returns the instance's most recent jobs, newest first.
func (s *Store) Jobs(ctx context.Context, instance string, limit int) ([]history.Job, error) {
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE instance = ? ORDER BY seq DESC LIMIT ?`, instance, limit)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	return scanJobs(rows)
}

// LiveJobs returns every queued or running job of every instance, oldest
// first: what a starting daemon must settle.
func (s *Store) LiveJobs(ctx context.Context) ([]history.Job, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE state IN (?, ?) ORDER BY seq`, string(history.JobQueued), string(history.JobRunning))
	if err != nil {
		return nil, fmt.Errorf("reading live jobs: %w", err)
	}
	return scanJobs(rows)
}

func scanJobs(rows *sql.Rows) ([]history.Job, error) {
	defer rows.Close()
	out := []history.Job{}
	for rows.Next() {
		var (
			j                          history.Job
			state, spec, plan          string
			created, started, finished int64
		)
		if err := rows.Scan(&j.Seq, &j.ID, &j.Instance, &state, &j.Stage, &spec, &plan, &j.Commit, &j.Error, &created, &started, &finished, &j.Checksum); err != nil {
			return nil, fmt.Errorf("reading jobs: %w", err)
		}
		j.State, j.Spec, j.Plan = history.JobState(state), []byte(spec), []byte(plan)
		j.CreatedAt, j.StartedAt, j.FinishedAt = fromNanos(created), fromNanos(started), fromNanos(finished)
		out = append(out, j)
	}
	return out, rows.Err()
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
