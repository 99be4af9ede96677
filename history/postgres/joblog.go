package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxd/fluxd/history"
)

// AppendJobLog stores one line of a job's log. A line of the same job
// and Seq already stored is left as it is, so a retried insert is
// harmless.
func (s *Store) AppendJobLog(ctx context.Context, l history.JobLogLine) error {
	if l.JobID == "" || l.Instance == "" || l.Seq <= 0 {
		return errors.New("saving a job log line without a job, an instance or a sequence number")
	}
	// A line quotes git's or a tool's output, which may hold any byte.
	l.Stage, l.Text = history.CleanText(l.Stage), history.CleanText(l.Text)
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO job_log (job_id, instance, seq, at, stage, text) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (job_id, seq) DO NOTHING`, l.JobID, l.Instance, l.Seq, nanos(l.Time), l.Stage, l.Text)
		return err
	})
	if err != nil {
		return fmt.Errorf("saving a log line of job %s: %w", l.JobID, err)
	}
	return nil
}

// JobLog returns the lines of one of the instance's jobs after seq after,
// in order.
func (s *Store) JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error) {
	var out []history.JobLogLine
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT seq, at, stage, text FROM job_log WHERE job_id = $1 AND instance = $2 AND seq > $3 ORDER BY seq`, id, instance, after)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []history.JobLogLine{}
		for rows.Next() {
			l := history.JobLogLine{JobID: id, Instance: instance}
			var at int64
			if err := rows.Scan(&l.Seq, &at, &l.Stage, &l.Text); err != nil {
				return err
			}
			l.Time = fromNanos(at)
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, err)
	}
	return out, nil
}
