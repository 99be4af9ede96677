package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// addNotice writes n's row in tx (Record's, or its own).
func addNotice(ctx context.Context, tx *sql.Tx, n history.Notice) (int64, error) {
	ev, err := json.Marshal(n.Event.Clean())
	if err != nil {
		return 0, err
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, started, event, created_at) VALUES (?, ?, ?, ?)`,
		n.Event.ID, n.Started, string(ev), n.CreatedAt.UnixNano())
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// Notify stores a notice that has no history row.
func (s *Store) Notify(ctx context.Context, n history.Notice) (int64, error) {
	if n.Event.Instance == "" {
		return 0, errors.New("storing a notice without an instance")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("storing a notice: %w", err)
	}
	defer tx.Rollback()
	id, err := addNotice(ctx, tx, n)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return 0, fmt.Errorf("storing a notice: %w", err)
	}
	return id, nil
}

// Notices returns at most limit notices after after, oldest first.
func (s *Store) Notices(ctx context.Context, after int64, limit int) ([]history.Notice, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, event_id, started, event, created_at FROM outbox WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	defer rows.Close()
	var out []history.Notice
	for rows.Next() {
		var (
			n       history.Notice
			eventID int64
			ev      string
			created int64
		)
		if err := rows.Scan(&n.ID, &eventID, &n.Started, &ev, &created); err != nil {
			return nil, fmt.Errorf("reading the outbox: %w", err)
		}
		if err := json.Unmarshal([]byte(ev), &n.Event); err != nil {
			return nil, fmt.Errorf("reading notice %d: %w", n.ID, err)
		}
		n.Event.ID, n.CreatedAt = eventID, time.Unix(0, created)
		out = append(out, n)
	}
	return out, rows.Err()
}

// LastNotice is the newest notice's ID.
func (s *Store) LastNotice(ctx context.Context) (int64, error) {
	var id int64
	// sqlite_sequence keeps the highest ID ever given, even once pruned.
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)`).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("reading the outbox: %w", err)
	}
	return id, nil
}

// NoticeCursor returns receiver's cursor.
func (s *Store) NoticeCursor(ctx context.Context, receiver string) (int64, bool, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT last_id FROM outbox_cursors WHERE receiver = ?`, receiver).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the outbox cursor of %s: %w", receiver, err)
	}
	return id, true, nil
}

// SetNoticeCursor moves receiver's cursor forward to id.
func (s *Store) SetNoticeCursor(ctx context.Context, receiver string, id int64) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO outbox_cursors (receiver, last_id) VALUES (?, ?)
		ON CONFLICT (receiver) DO UPDATE SET last_id = max(last_id, excluded.last_id)`, receiver, id)
	if err != nil {
		return fmt.Errorf("saving the outbox cursor of %s: %w", receiver, err)
	}
	return nil
}

// PendingNotices counts the notices after after, and the oldest's time.
func (s *Store) PendingNotices(ctx context.Context, after int64) (int64, time.Time, error) {
	var (
		n      int64
		oldest sql.NullInt64
	)
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM outbox WHERE id > ?`, after).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("reading the outbox: %w", err)
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, time.Unix(0, oldest.Int64), nil
}

// PruneNotices deletes the notices stored before before.
func (s *Store) PruneNotices(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM outbox WHERE created_at < ?`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("pruning the outbox: %w", err)
	}
	return res.RowsAffected()
}
