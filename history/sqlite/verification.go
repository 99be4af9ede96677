package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// Image signature verification results, shared by whatever opens the
// file.

// VerificationResult returns the result kept for the key.
func (s *Store) VerificationResult(ctx context.Context, repository, digest, profile string) (history.VerificationResult, error) {
	r := history.VerificationResult{Repository: repository, Digest: digest, Profile: profile}
	var checked int64
	err := s.db.QueryRowContext(ctx, `SELECT outcome, final, signer, reason, detail, checked_at FROM verification_results
		WHERE repository = ? AND digest = ? AND profile = ?`, repository, digest, profile).
		Scan(&r.Outcome, &r.Final, &r.Signer, &r.Reason, &r.Detail, &checked)
	if errors.Is(err, sql.ErrNoRows) {
		return history.VerificationResult{}, fmt.Errorf("verification result: %w", history.ErrNotFound)
	}
	if err != nil {
		return history.VerificationResult{}, fmt.Errorf("reading a verification result: %w", err)
	}
	r.CheckedAt = time.Unix(0, checked)
	return r, nil
}

// SaveVerificationResult keeps r unless a final result of its key is
// kept.
func (s *Store) SaveVerificationResult(ctx context.Context, r history.VerificationResult) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO verification_results (repository, digest, profile, outcome, final, signer, reason, detail, checked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repository, digest, profile) DO UPDATE SET outcome = excluded.outcome, final = excluded.final, signer = excluded.signer,
			reason = excluded.reason, detail = excluded.detail, checked_at = excluded.checked_at
		WHERE NOT verification_results.final`,
		r.Repository, r.Digest, r.Profile, r.Outcome, r.Final, r.Signer, r.Reason, r.Detail, r.CheckedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("writing a verification result: %w", err)
	}
	return nil
}

// EachVerificationResult calls fn with every verification result kept,
// a page at a time (no read stays open while fn writes elsewhere).
func (s *Store) EachVerificationResult(ctx context.Context, fn func(history.VerificationResult) error) error {
	var after [3]string
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT repository, digest, profile, outcome, final, signer, reason, detail, checked_at FROM verification_results
			WHERE (repository, digest, profile) > (?, ?, ?) ORDER BY repository, digest, profile LIMIT ?`, after[0], after[1], after[2], exportPage)
		if err != nil {
			return fmt.Errorf("reading verification results: %w", err)
		}
		var page []history.VerificationResult
		for rows.Next() {
			var r history.VerificationResult
			var checked int64
			if err := rows.Scan(&r.Repository, &r.Digest, &r.Profile, &r.Outcome, &r.Final, &r.Signer, &r.Reason, &r.Detail, &checked); err != nil {
				rows.Close()
				return fmt.Errorf("reading verification results: %w", err)
			}
			r.CheckedAt = time.Unix(0, checked)
			page = append(page, r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("reading verification results: %w", err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < exportPage {
			return nil
		}
		last := page[len(page)-1]
		after = [3]string{last.Repository, last.Digest, last.Profile}
	}
}
