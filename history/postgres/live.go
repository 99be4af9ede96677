package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// LiveChannel is the LISTEN/NOTIFY channel told of new live events.
const LiveChannel = "fluxd_live"

// liveLock orders the live stream's commits as outboxLock does the
// outbox's.
const liveLock = 0x666c75786c697665 // "fluxlive"

// AppendLive stores live events, in order, in one transaction, and
// wakes the replicas' readers (NOTIFY is sent on COMMIT).
func (s *Store) AppendLive(ctx context.Context, evs []history.LiveEvent) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(liveLock)); err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.At.IsZero() {
				ev.At = time.Now()
			}
			if _, err := tx.Exec(ctx, `INSERT INTO live_events (instance, type, data, at) VALUES ($1, $2, $3, $4)`,
				history.CleanText(ev.Instance), history.CleanText(ev.Type), ev.Data, ev.At.UnixNano()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, LiveChannel); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			// Not tried again: a second attempt after a COMMIT that
			// happened would show the events twice.
			return fmt.Errorf("%w: %w", errAmbiguous, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing live events: %w", err)
	}
	return nil
}

// LiveAfter returns at most limit live events after after, oldest first.
func (s *Store) LiveAfter(ctx context.Context, after int64, limit int) ([]history.LiveEvent, error) {
	var out []history.LiveEvent
	err := s.retry(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT id, instance, type, data, at FROM live_events WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ev history.LiveEvent
				at int64
			)
			if err := rows.Scan(&ev.ID, &ev.Instance, &ev.Type, &ev.Data, &at); err != nil {
				return err
			}
			ev.At = time.Unix(0, at)
			out = append(out, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading live events: %w", err)
	}
	return out, nil
}

// LastLive is the newest live event's ID.
func (s *Store) LastLive(ctx context.Context) (int64, error) {
	var id int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT max(id) FROM live_events), 0)`).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("reading live events: %w", err)
	}
	return id, nil
}

// PruneLive deletes the live events stored before before.
func (s *Store) PruneLive(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.retry(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM live_events WHERE at < $1`, before.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning live events: %w", err)
	}
	return n, nil
}

// WaitLive returns a channel that receives a value whenever live events
// are stored (by any replica), until ctx ends: a LISTEN on a connection
// of its own, opened again when it breaks.
func (s *Store) WaitLive(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			s.listen(ctx, ch)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return ch
}

func (s *Store) listen(ctx context.Context, ch chan struct{}) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN `+LiveChannel); err != nil {
		return
	}
	defer func() {
		// The connection goes back to the pool: it must not go on
		// listening there.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `UNLISTEN `+LiveChannel); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	// A wake right away: whatever was stored before the LISTEN.
	select {
	case ch <- struct{}{}:
	default:
	}
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
