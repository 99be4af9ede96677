package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// SaveSession stores a web session within the bounds.
func (s *Store) SaveSession(ctx context.Context, se history.WebSession, perToken, limit int) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("saving a web session: %w", err)
	}
	defer tx.Rollback()
	stmts := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM web_sessions WHERE expires_at < ?`, []any{time.Now().UnixNano()}},
		{`DELETE FROM web_sessions WHERE id IN (SELECT id FROM web_sessions WHERE token_hash = ? ORDER BY created_at DESC LIMIT -1 OFFSET ?)`, []any{se.TokenHash, max(perToken-1, 0)}},
	}
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return false, fmt.Errorf("saving a web session: %w", err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM web_sessions`).Scan(&n); err != nil {
		return false, fmt.Errorf("saving a web session: %w", err)
	}
	if n >= limit {
		return false, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO web_sessions (id, token_hash, sealed, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		se.ID, se.TokenHash, se.Sealed, se.CreatedAt.UnixNano(), se.ExpiresAt.UnixNano()); err != nil {
		return false, fmt.Errorf("saving a web session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("saving a web session: %w", err)
	}
	return true, nil
}

// Session returns the live web session of id.
func (s *Store) Session(ctx context.Context, id string) (history.WebSession, error) {
	se := history.WebSession{ID: id}
	var created, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT token_hash, sealed, created_at, expires_at FROM web_sessions WHERE id = ?`, id).
		Scan(&se.TokenHash, &se.Sealed, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && time.Now().UnixNano() > expires) {
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
	if _, err := s.db.ExecContext(ctx, `DELETE FROM web_sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("ending a web session: %w", err)
	}
	return nil
}
