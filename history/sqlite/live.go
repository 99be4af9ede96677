package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// AppendLive stores live events, in order, in one transaction.
func (s *Store) AppendLive(ctx context.Context, evs []history.LiveEvent) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storing live events: %w", err)
	}
	defer tx.Rollback()
	for _, ev := range evs {
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO live_events (instance, type, data, at) VALUES (?, ?, ?, ?)`,
			history.CleanText(ev.Instance), history.CleanText(ev.Type), ev.Data, ev.At.UnixNano()); err != nil {
			return fmt.Errorf("storing live events: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storing live events: %w", err)
	}
	return nil
}

// LiveAfter returns at most limit live events after after, oldest first.
func (s *Store) LiveAfter(ctx context.Context, after int64, limit int) ([]history.LiveEvent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, instance, type, data, at FROM live_events WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading live events: %w", err)
	}
	defer rows.Close()
	var out []history.LiveEvent
	for rows.Next() {
		var (
			ev history.LiveEvent
			at int64
		)
		if err := rows.Scan(&ev.ID, &ev.Instance, &ev.Type, &ev.Data, &at); err != nil {
			return nil, fmt.Errorf("reading live events: %w", err)
		}
		ev.At = time.Unix(0, at)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// LastLive is the newest live event's ID.
func (s *Store) LastLive(ctx context.Context) (int64, error) {
	var id int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'live_events'), 0)`).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading live events: %w", err)
	}
	return id, nil
}

// PruneLive deletes the live events stored before before.
func (s *Store) PruneLive(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM live_events WHERE at < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning live events: %w", err)
	}
	return res.RowsAffected()
}
