package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	rows, err := s.db.QueryContext(ctx, `SELECT t.tag, t.digest, t.stable, t.next_check, i.created_at, i.config_digest, i.platform, i.labels FROM registry_tags t
		LEFT JOIN registry_images i ON i.digest = t.digest WHERE t.repository = ?`, repository)
	if err != nil {
		return nil, fmt.Errorf("reading the registry cache: %w", err)
	}
	defer rows.Close()
	out := map[string]registry.CachedTag{}
	for rows.Next() {
		var (
			tag, digest              string
			stable, nextCheck        int64
			created                  sql.NullInt64
			config, platform, labels sql.NullString
		)
		if err := rows.Scan(&tag, &digest, &stable, &nextCheck, &created, &config, &platform, &labels); err != nil {
			return nil, err
		}
		ct := registry.CachedTag{Digest: digest, CreatedAt: fromNanos(created.Int64), HasCreated: created.Valid,
			Stable: int(stable), NextCheck: fromNanos(nextCheck), ConfigDigest: config.String, Platform: platform.String}
		if labels.String != "" {
			_ = json.Unmarshal([]byte(labels.String), &ct.Labels)
		}
		out[tag] = ct
	}
	return out, rows.Err()
}

// SaveTags records tags' digests and re-check state and digests' creation
// times, and forgets removed tags, in one transaction.
func (s *Store) SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, images map[string]registry.ImageMeta, removed []string) error {
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
	img, err := tx.PrepareContext(ctx, `INSERT INTO registry_images (digest, created_at, config_digest, platform, labels) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at, config_digest = excluded.config_digest,
			platform = excluded.platform, labels = excluded.labels`)
	if err != nil {
		return err
	}
	defer img.Close()
	for digest, m := range images {
		labels := ""
		if len(m.Labels) > 0 {
			b, err := json.Marshal(m.Labels)
			if err != nil {
				return err
			}
			labels = string(b)
		}
		if _, err := img.ExecContext(ctx, digest, nanos(m.CreatedAt), m.ConfigDigest, m.Platform, labels); err != nil {
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

// TagList returns the tag list kept for repository, if any.
func (s *Store) TagList(ctx context.Context, repository string) (registry.TagList, bool, error) {
	var (
		tags                 string
		stable, next, readAt int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT tags, stable, next_read, read_at FROM registry_lists WHERE repository = ?`, repository).
		Scan(&tags, &stable, &next, &readAt)
	if errors.Is(err, sql.ErrNoRows) {
		return registry.TagList{}, false, nil
	}
	if err != nil {
		return registry.TagList{}, false, fmt.Errorf("reading the registry cache's tag lists: %w", err)
	}
	return registry.TagList{Tags: registry.SplitTags(tags), Stable: int(stable), Next: fromNanos(next), ReadAt: fromNanos(readAt)}, true, nil
}

// SaveTagList keeps l as repository's tag list, unless the list kept was
// read later (ReadAt), which stays; a kept list whose read began more
// than registry.ListClockSkew after this clock's now is from a clock that
// runs ahead, and is replaced.
func (s *Store) SaveTagList(ctx context.Context, repository string, l registry.TagList) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO registry_lists (repository, tags, stable, next_read, read_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (repository) DO UPDATE SET tags = excluded.tags, stable = excluded.stable, next_read = excluded.next_read, read_at = excluded.read_at
		WHERE excluded.read_at >= registry_lists.read_at OR registry_lists.read_at > ?`,
		repository, registry.JoinTags(l.Tags), l.Stable, nanos(l.Next), nanos(l.ReadAt), nanos(time.Now().Add(registry.ListClockSkew)))
	if err != nil {
		return fmt.Errorf("writing the registry cache's tag lists: %w", err)
	}
	return nil
}
