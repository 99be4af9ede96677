package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxd/fluxd/history"
)

// AppendJobLog stores one line of a job's log. A line of the same job
// and Seq already stored is left as it is.
func (s *Store) AppendJobLog(ctx context.Context, l history.JobLogLine) error {
	if l.JobID == "" || l.Instance == "" || l.Seq <= 0 {
		return errors.New("saving a job log line without a job, an instance or a sequence number")
	}
	// A line quotes git's or a tool's output, which may hold any byte.
	l.Stage, l.Text = history.CleanText(l.Stage), history.CleanText(l.Text)
	_, err := s.db.ExecContext(ctx, `INSERT INTO job_log (job_id, instance, seq, at, stage, text) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (job_id, seq) DO NOTHING`, l.JobID, l.Instance, l.Seq, nanos(l.Time), l.Stage, l.Text)
	if err != nil {
		return fmt.Errorf("saving a log line of job %s: %w", l.JobID, err)
	}
	return nil
}

// JobLog returns the lines of one of the instance's jobs after seq after,
// in order.
func (s *Store) JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, at, stage, text FROM job_log WHERE job_id = ? AND instance = ? AND seq > ? ORDER BY seq`, id, instance, after)
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, err)
	}
	defer rows.Close()
	out := []history.JobLogLine{}
	for rows.Next() {
		l := history.JobLogLine{JobID: id, Instance: instance}
		var at int64
		if err := rows.Scan(&l.Seq, &at, &l.Stage, &l.Text); err != nil {
			return nil, fmt.Errorf("reading the log of job %s: %w", id, err)
		}
		l.Time = fromNanos(at)
		out = append(out, l)
	}
	return out, rows.Err()
}
