package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
)

// Image signature verification results, shared by the replicas.

// VerificationResult returns the result kept for the key.
func (s *Store) VerificationResult(ctx context.Context, repository, digest, profile string) (history.VerificationResult, error) {
	r := history.VerificationResult{Repository: repository, Digest: digest, Profile: profile}
	var checked int64
	err := s.retry(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT outcome, final, signer, reason, detail, checked_at FROM verification_results
			WHERE repository = $1 AND digest = $2 AND profile = $3`, repository, digest, profile).
			Scan(&r.Outcome, &r.Final, &r.Signer, &r.Reason, &r.Detail, &checked)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return history.VerificationResult{}, fmt.Errorf("verification result: %w", history.ErrNotFound)
	}
	if err != nil {
		return history.VerificationResult{}, fmt.Errorf("reading a verification result: %w", err)
	}
	r.CheckedAt = time.Unix(0, checked)
	return r, nil
}

// SaveVerificationResult keeps r unless a final result of its key is
// kept. It is one statement: replicas saving the same key at once are
// serialised by the row, and a final one written first stays.
func (s *Store) SaveVerificationResult(ctx context.Context, r history.VerificationResult) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO verification_results (repository, digest, profile, outcome, final, signer, reason, detail, checked_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (repository, digest, profile) DO UPDATE SET outcome = excluded.outcome, final = excluded.final, signer = excluded.signer,
				reason = excluded.reason, detail = excluded.detail, checked_at = excluded.checked_at
			WHERE NOT verification_results.final`,
			r.Repository, r.Digest, r.Profile, r.Outcome, r.Final, r.Signer, r.Reason, r.Detail, r.CheckedAt.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("writing a verification result: %w", err)
	}
	return nil
}

// EachVerificationResult calls fn with every verification result kept,
// a page at a time.
func (s *Store) EachVerificationResult(ctx context.Context, fn func(history.VerificationResult) error) error {
	var after [3]string
	for {
		var page []history.VerificationResult
		err := s.retry(ctx, func(ctx context.Context) error {
			rows, err := s.pool.Query(ctx, `SELECT repository, digest, profile, outcome, final, signer, reason, detail, checked_at FROM verification_results
				WHERE (repository COLLATE "C", digest COLLATE "C", profile COLLATE "C") > ($1, $2, $3)
				ORDER BY repository COLLATE "C", digest COLLATE "C", profile COLLATE "C" LIMIT $4`, after[0], after[1], after[2], exportPage)
			if err != nil {
				return err
			}
			defer rows.Close()
			page = nil
			for rows.Next() {
				var r history.VerificationResult
				var checked int64
				if err := rows.Scan(&r.Repository, &r.Digest, &r.Profile, &r.Outcome, &r.Final, &r.Signer, &r.Reason, &r.Detail, &checked); err != nil {
					return err
				}
				r.CheckedAt = time.Unix(0, checked)
				page = append(page, r)
			}
			return rows.Err()
		})
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
