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
	rows, err := s.db.QueryContext(ctx, `SELECT seq, at, stage, text FROM job_log WHERE job_id = ? AND instance = ? AND seq > ? ORDER BY seq LIMIT ?`, id, instance, after, history.MaxJobLogLines)
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

// AppendJobLogs stores lines in one transaction: a report of a release of
// many workloads writes many lines at once, and one commit each would
// cost a disk sync each.
func (s *Store) AppendJobLogs(ctx context.Context, lines []history.JobLogLine) error {
	for _, l := range lines {
		if l.JobID == "" || l.Instance == "" || l.Seq <= 0 {
			return errors.New("saving a job log line without a job, an instance or a sequence number")
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("saving job log lines: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO job_log (job_id, instance, seq, at, stage, text) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (job_id, seq) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("saving job log lines: %w", err)
	}
	defer stmt.Close()
	for _, l := range lines {
		if _, err := stmt.ExecContext(ctx, l.JobID, l.Instance, l.Seq, nanos(l.Time), history.CleanText(l.Stage), history.CleanText(l.Text)); err != nil {
			return fmt.Errorf("saving a log line of job %s: %w", l.JobID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("saving job log lines: %w", err)
	}
	return nil
}
