package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/registry"
)

// CachedTags returns what is known of a repository's tags: digest, and
// creation time where known.
func (s *Store) CachedTags(ctx context.Context, repository string) (map[string]registry.CachedTag, error) {
	var out map[string]registry.CachedTag
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT t.tag, t.digest, t.stable, t.next_check, i.created_at, i.config_digest, i.platform, i.labels FROM registry_tags t
		LEFT JOIN registry_images i ON i.digest = t.digest WHERE t.repository = $1`, repository)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = map[string]registry.CachedTag{}
		for rows.Next() {
			var (
				tag, digest              string
				stable                   int32
				nextCheck                int64
				created                  *int64
				config, platform, labels *string
			)
			if err := rows.Scan(&tag, &digest, &stable, &nextCheck, &created, &config, &platform, &labels); err != nil {
				return err
			}
			ct := registry.CachedTag{Digest: digest, Stable: int(stable), NextCheck: fromNanos(nextCheck)}
			if created != nil {
				ct.CreatedAt, ct.HasCreated = fromNanos(*created), true
			}
			if config != nil {
				ct.ConfigDigest = *config
			}
			if platform != nil {
				ct.Platform = *platform
			}
			if labels != nil && *labels != "" {
				_ = json.Unmarshal([]byte(*labels), &ct.Labels)
			}
			out[tag] = ct
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the registry cache: %w", err)
	}
	return out, nil
}

// SaveTags records tags' digests and re-check state and digests' creation
// times, and forgets removed tags, in one transaction (one round trip: a
// batch). Every statement is an upsert or a delete, so a lost connection
// is tried again.
func (s *Store) SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, images map[string]registry.ImageMeta, removed []string) error {
	now := time.Now().UnixNano()
	labels := make(map[string]string, len(images))
	for digest, m := range images {
		if len(m.Labels) > 0 {
			j, err := json.Marshal(m.Labels)
			if err != nil {
				return err
			}
			labels[digest] = string(j)
		}
	}
	if len(tags)+len(images)+len(removed) == 0 {
		return nil
	}
	// Rows are written in one order (tags, then digests, sorted; removed
	// sorted), so that two replicas saving the same repository lock its
	// rows in the same order and one waits for the other instead of both
	// deadlocking (map order differs from call to call).
	tagNames := slices.Sorted(maps.Keys(tags))
	digests := slices.Sorted(maps.Keys(images))
	removed = slices.Sorted(slices.Values(removed))
	// The batch is built for each attempt: a batch holds the names of the
	// statements pgx prepared on the connection it was first sent on, and
	// a new connection after a failure knows none of them.
	// A first scan of a large repository is one batch of many thousand
	// statements: each attempt gets one OpTimeout per 5,000 rows.
	n := len(tags) + len(images) + 1
	err := s.retryWithin(ctx, s.opTimeout*time.Duration(1+n/5000), func(ctx context.Context) error {
		b := &pgx.Batch{}
		for _, tag := range tagNames {
			st := tags[tag]
			b.Queue(`INSERT INTO registry_tags (repository, tag, digest, checked_at, stable, next_check) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (repository, tag) DO UPDATE SET digest = excluded.digest, checked_at = excluded.checked_at,
			stable = excluded.stable, next_check = excluded.next_check`, repository, tag, st.Digest, now, st.Stable, nanos(st.NextCheck))
		}
		for _, digest := range digests {
			m := images[digest]
			b.Queue(`INSERT INTO registry_images (digest, created_at, config_digest, platform, labels) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at, config_digest = excluded.config_digest,
			platform = excluded.platform, labels = excluded.labels`, digest, nanos(m.CreatedAt), m.ConfigDigest, m.Platform, labels[digest])
		}
		if len(removed) > 0 {
			b.Queue(`DELETE FROM registry_tags WHERE repository = $1 AND tag = ANY($2)`, repository, removed)
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return tx.SendBatch(ctx, b).Close()
		})
	})
	if err != nil {
		return fmt.Errorf("writing the registry cache: %w", err)
	}
	if len(tags)+len(images) >= analyzeAfter {
		// A first scan of a large repository changes the tables' size
		// by orders of magnitude, and until autovacuum's next ANALYZE
		// (a minute or more) the planner joins them row by row:
		// measured on 100,000 cached tags, a nested loop of index
		// lookups took 1.8 s in the server, the hash join 0.9 s.
		// The statistics are refreshed at once instead (best effort).
		_ = s.attempt(ctx, s.opTimeout, func(ctx context.Context) error {
			_, err := s.pool.Exec(ctx, `ANALYZE registry_tags, registry_images`)
			return err
		})
	}
	return nil
}

// analyzeAfter is how many rows one SaveTags writes before it refreshes
// the planner's statistics.
const analyzeAfter = 5000

// TagList returns the tag list kept for repository, if any.
func (s *Store) TagList(ctx context.Context, repository string) (registry.TagList, bool, error) {
	var (
		l     registry.TagList
		found bool
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		var (
			tags         string
			stable       int32
			next, readAt int64
		)
		err := s.pool.QueryRow(ctx, `SELECT tags, stable, next_read, read_at FROM registry_lists WHERE repository = $1`, repository).
			Scan(&tags, &stable, &next, &readAt)
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
			return nil
		}
		if err != nil {
			return err
		}
		l = registry.TagList{Tags: registry.SplitTags(tags), Stable: int(stable), Next: fromNanos(next), ReadAt: fromNanos(readAt)}
		found = true
		return nil
	})
	if err != nil {
		return registry.TagList{}, false, fmt.Errorf("reading the registry cache's tag lists: %w", err)
	}
	return l, found, nil
}

// SaveTagList keeps l as repository's tag list, unless the list kept was
// read later (ReadAt), which stays; a kept list whose read began more
// than registry.ListClockSkew after this clock's now is from a clock that
// runs ahead, and is replaced. An upsert: tried again on a new
// connection after a lost one.
func (s *Store) SaveTagList(ctx context.Context, repository string, l registry.TagList) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO registry_lists (repository, tags, stable, next_read, read_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (repository) DO UPDATE SET tags = excluded.tags, stable = excluded.stable, next_read = excluded.next_read, read_at = excluded.read_at
		WHERE excluded.read_at >= registry_lists.read_at OR registry_lists.read_at > $6`,
			repository, registry.JoinTags(l.Tags), l.Stable, nanos(l.Next), nanos(l.ReadAt), nanos(time.Now().Add(registry.ListClockSkew)))
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the registry cache's tag lists: %w", err)
	}
	return nil
}
