package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
)

// sessionLock serialises SaveSession, so that the bounds hold across
// replicas signing people in at once.
const sessionLock = 0x666c757873657373 // "fluxsess"

// SaveSession stores a web session within the bounds.
func (s *Store) SaveSession(ctx context.Context, se history.WebSession, perToken, limit int) (bool, error) {
	var saved bool
	err := s.retry(ctx, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(sessionLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM web_sessions WHERE expires_at < $1`, time.Now().UnixNano()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM web_sessions WHERE id IN (SELECT id FROM web_sessions WHERE token_hash = $1 ORDER BY created_at DESC OFFSET $2)`,
			se.TokenHash, max(perToken-1, 0)); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM web_sessions`).Scan(&n); err != nil {
			return err
		}
		saved = n < limit
		if saved {
			// The ID is the hash of a fresh random key: a conflict is a
			// retry of this very insert.
			if _, err := tx.Exec(ctx, `INSERT INTO web_sessions (id, token_hash, sealed, created_at, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
				se.ID, se.TokenHash, se.Sealed, se.CreatedAt.UnixNano(), se.ExpiresAt.UnixNano()); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return false, fmt.Errorf("saving a web session: %w", err)
	}
	return saved, nil
}

// Session returns the live web session of id.
func (s *Store) Session(ctx context.Context, id string) (history.WebSession, error) {
	se := history.WebSession{ID: id}
	var created, expires int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT token_hash, sealed, created_at, expires_at FROM web_sessions WHERE id = $1`, id).
			Scan(&se.TokenHash, &se.Sealed, &created, &expires)
	})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && time.Now().UnixNano() > expires) {
		return history.WebSession{}, fmt.Errorf("web session: %w", history.ErrNotFound)
	}
	if err != nil {
		return history.WebSession{}, fmt.Errorf("reading a web session: %w", err)
	}
	se.CreatedAt, se.ExpiresAt = time.Unix(0, created), time.Unix(0, expires)
	return se, nil
}

// DeleteSession ends the web session of id.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM web_sessions WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("ending a web session: %w", err)
	}
	return nil
}
