package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/registry"
)

// The registry metadata cache: tag → digest per repository, and digest →
// creation time. It survives restarts, so a fresh fluxd on an existing
// database does not refetch what it knows. Keys are registry facts, not
// instance data.

// CachedTags returns what is known of a repository's tags: digest, and
// creation time where known.
func (s *Store) CachedTags(ctx context.Context, repository string) (map[string]registry.CachedTag, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT t.tag, t.digest, t.stable, t.next_check, i.created_at FROM registry_tags t
		LEFT JOIN registry_images i ON i.digest = t.digest WHERE t.repository = ?`, repository)
	if err != nil {
		return nil, fmt.Errorf("reading the registry cache: %w", err)
	}
	defer rows.Close()
	out := map[string]registry.CachedTag{}
	for rows.Next() {
		var (
			tag, digest       string
			stable, nextCheck int64
			created           sql.NullInt64
		)
		if err := rows.Scan(&tag, &digest, &stable, &nextCheck, &created); err != nil {
			return nil, err
		}
		out[tag] = registry.CachedTag{Digest: digest, CreatedAt: fromNanos(created.Int64), HasCreated: created.Valid,
			Stable: int(stable), NextCheck: fromNanos(nextCheck)}
	}
	return out, rows.Err()
}

// SaveTags records tags' digests and re-check state and digests' creation
// times, and forgets removed tags, in one transaction.
func (s *Store) SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, created map[string]time.Time, removed []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing the registry cache: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	up, err := tx.PrepareContext(ctx, `INSERT INTO registry_tags (repository, tag, digest, checked_at, stable, next_check) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (repository, tag) DO UPDATE SET digest = excluded.digest, checked_at = excluded.checked_at,
			stable = excluded.stable, next_check = excluded.next_check`)
	if err != nil {
		return err
	}
	defer up.Close()
	for tag, st := range tags {
		if _, err := up.ExecContext(ctx, repository, tag, st.Digest, now, st.Stable, nanos(st.NextCheck)); err != nil {
			return fmt.Errorf("writing the registry cache: %w", err)
		}
	}
	img, err := tx.PrepareContext(ctx, `INSERT INTO registry_images (digest, created_at) VALUES (?, ?)
		ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at`)
	if err != nil {
		return err
	}
	defer img.Close()
	for digest, t := range created {
		if _, err := img.ExecContext(ctx, digest, nanos(t)); err != nil {
			return fmt.Errorf("writing the registry cache: %w", err)
		}
	}
	for _, tag := range removed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM registry_tags WHERE repository = ? AND tag = ?`, repository, tag); err != nil {
			return fmt.Errorf("writing the registry cache: %w", err)
		}
	}
	return tx.Commit()
}
