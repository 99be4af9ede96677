package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
)

// outboxLock is the key of the transaction-scoped advisory lock every
// writer of the outbox takes before inserting: notices then commit in the
// order of their IDs, so a reader that has seen notice n has seen every
// notice before it (a sequence alone gives IDs in the order of the
// inserts, not of the commits).
const outboxLock = 0x666c7578646f7574 // "fluxdout"

// NoticeChannel is the LISTEN/NOTIFY channel told of every new notice
// (its ID as payload), so that replicas' readers need not poll.
const NoticeChannel = "fluxd_outbox"

// addNotice writes n's row in tx (Record's, or its own).
func addNotice(ctx context.Context, tx pgx.Tx, n history.Notice) (int64, error) {
	ev, err := json.Marshal(n.Event.Clean())
	if err != nil {
		return 0, err
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(outboxLock)); err != nil {
		return 0, err
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (event_id, started, event, created_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		n.Event.ID, n.Started, string(ev), n.CreatedAt.UnixNano()).Scan(&id); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NoticeChannel, fmt.Sprint(id)); err != nil {
		return 0, err
	}
	return id, nil
}

// Notify stores a notice that has no history row. A failed connection is
// tried again, but not once COMMIT was sent (errAmbiguous): a second
// attempt would store a second notice under another ID, which receivers
// could not tell from a new one.
func (s *Store) Notify(ctx context.Context, n history.Notice) (int64, error) {
	if n.Event.Instance == "" {
		return 0, errors.New("storing a notice without an instance")
	}
	var id int64
	err := s.retry(ctx, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if id, err = addNotice(ctx, tx, n); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("%w: %w", errAmbiguous, err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storing a notice: %w", err)
	}
	return id, nil
}

// Notices returns at most limit notices after after, oldest first.
func (s *Store) Notices(ctx context.Context, after int64, limit int) ([]history.Notice, error) {
	var out []history.Notice
	err := s.retry(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT id, event_id, started, event, created_at FROM outbox WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				n       history.Notice
				eventID int64
				ev      string
				created int64
			)
			if err := rows.Scan(&n.ID, &eventID, &n.Started, &ev, &created); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(ev), &n.Event); err != nil {
				return fmt.Errorf("notice %d: %w", n.ID, err)
			}
			n.Event.ID, n.CreatedAt = eventID, time.Unix(0, created)
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	return out, nil
}

// LastNotice is the newest notice's ID.
func (s *Store) LastNotice(ctx context.Context) (int64, error) {
	var id int64
	err := s.retry(ctx, func(ctx context.Context) error {
		// Notices commit in ID order (outboxLock), so the newest visible
		// one has every earlier one before it.
		return s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT max(id) FROM outbox), 0)`).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("reading the outbox: %w", err)
	}
	return id, nil
}

// NoticeCursor returns receiver's cursor.
func (s *Store) NoticeCursor(ctx context.Context, receiver string) (int64, bool, error) {
	var id int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT last_id FROM outbox_cursors WHERE receiver = $1`, receiver).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the outbox cursor of %s: %w", receiver, err)
	}
	return id, true, nil
}

// SetNoticeCursor moves receiver's cursor forward to id.
func (s *Store) SetNoticeCursor(ctx context.Context, receiver string, id int64) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO outbox_cursors (receiver, last_id) VALUES ($1, $2)
			ON CONFLICT (receiver) DO UPDATE SET last_id = GREATEST(outbox_cursors.last_id, excluded.last_id)`, receiver, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("saving the outbox cursor of %s: %w", receiver, err)
	}
	return nil
}

// PendingNotices counts the notices after after, and the oldest's time.
func (s *Store) PendingNotices(ctx context.Context, after int64) (int64, time.Time, error) {
	var (
		n      int64
		oldest *int64
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM outbox WHERE id > $1`, after).Scan(&n, &oldest)
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("reading the outbox: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, time.Unix(0, *oldest), nil
}

// PruneNotices deletes the notices stored before before.
func (s *Store) PruneNotices(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.retry(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM outbox WHERE created_at < $1`, before.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning the outbox: %w", err)
	}
	return n, nil
}
