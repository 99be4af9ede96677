package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
)

// The promotion tables are ordered by their text keys under the "C"
// collation, byte by byte as SQLite orders them, whatever the database's
// collation is.

// SavePromotionBundle stores b unless its pipeline has a bundle of its
// ID already (bundles never change; the first stays). Running it twice is
// harmless, so a failed connection is tried again.
func (s *Store) SavePromotionBundle(ctx context.Context, b history.PromotionBundle) error {
	if err := b.Validate(); err != nil {
		return err
	}
	b = b.Clean()
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO promotion_bundles (pipeline, id, created_at, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (pipeline, id) DO NOTHING`, b.Pipeline, b.ID, b.Created.UnixNano(), string(b.Data))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing bundle %s of pipeline %s: %w", b.ID, b.Pipeline, err)
	}
	return nil
}

// PromotionBundles returns the pipeline's bundles, oldest first.
func (s *Store) PromotionBundles(ctx context.Context, pipeline string) ([]history.PromotionBundle, error) {
	var out []history.PromotionBundle
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT id, created_at, data FROM promotion_bundles WHERE pipeline = $1 ORDER BY created_at, id COLLATE "C"`, pipeline)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.PromotionBundle, error) {
			b := history.PromotionBundle{Pipeline: pipeline}
			var created int64
			var data string
			err := row.Scan(&b.ID, &created, &data)
			b.Created, b.Data = time.Unix(0, created), []byte(data)
			return b, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the bundles of pipeline %s: %w", pipeline, err)
	}
	return out, nil
}

// PutPromotionRecord writes r if the stored record is at r.Version (0:
// none is stored), in one statement: of writers racing from one version,
// the row lock lets one through and the others find the version moved on.
//
// Each call draws a key, stored with the row it writes. A failed
// connection is tried again, even once the statement was sent: when the
// retry finds the version moved on under this call's own key, the first
// attempt did commit, and the write is reported as done rather than as a
// conflict with itself.
func (s *Store) PutPromotionRecord(ctx context.Context, r history.PromotionRecord) (history.PromotionRecord, error) {
	if err := r.Validate(); err != nil {
		return history.PromotionRecord{}, err
	}
	r = r.Clean()
	if r.Updated.IsZero() {
		r.Updated = time.Now()
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := hex.EncodeToString(raw[:])
	var conflict bool
	err := s.retry(ctx, func(ctx context.Context) error {
		var (
			q    string
			args []any
		)
		if r.Version == 0 {
			q = `INSERT INTO promotion_records (pipeline, stage, bundle, version, updated_at, data, write_key) VALUES ($1, $2, $3, 1, $4, $5, $6)
				ON CONFLICT (pipeline, stage, bundle) DO NOTHING`
			args = []any{r.Pipeline, r.Stage, r.Bundle, r.Updated.UnixNano(), string(r.Data), key}
		} else {
			q = `UPDATE promotion_records SET version = version + 1, updated_at = $1, data = $2, write_key = $3
				WHERE pipeline = $4 AND stage = $5 AND bundle = $6 AND version = $7`
			args = []any{r.Updated.UnixNano(), string(r.Data), key, r.Pipeline, r.Stage, r.Bundle, r.Version}
		}
		tag, err := s.pool.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			conflict = false
			return nil
		}
		var stored string
		err = s.pool.QueryRow(ctx, `SELECT write_key FROM promotion_records WHERE pipeline = $1 AND stage = $2 AND bundle = $3`,
			r.Pipeline, r.Stage, r.Bundle).Scan(&stored)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		conflict = stored != key
		return nil
	})
	if err != nil {
		return history.PromotionRecord{}, fmt.Errorf("storing bundle %s in stage %s of pipeline %s: %w", r.Bundle, r.Stage, r.Pipeline, err)
	}
	if conflict {
		return history.PromotionRecord{}, r.Conflict()
	}
	r.Version++
	return r, nil
}

// PromotionRecords returns the pipeline's records, by stage and bundle.
func (s *Store) PromotionRecords(ctx context.Context, pipeline string) ([]history.PromotionRecord, error) {
	var out []history.PromotionRecord
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT stage, bundle, version, updated_at, data FROM promotion_records WHERE pipeline = $1
			ORDER BY stage COLLATE "C", bundle COLLATE "C"`, pipeline)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.PromotionRecord, error) {
			r := history.PromotionRecord{Pipeline: pipeline}
			var updated int64
			var data string
			err := row.Scan(&r.Stage, &r.Bundle, &r.Version, &updated, &data)
			r.Updated, r.Data = time.Unix(0, updated), []byte(data)
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the promotion records of pipeline %s: %w", pipeline, err)
	}
	return out, nil
}

// SetPromotionPause pauses a stage, replacing its pause if it has one.
func (s *Store) SetPromotionPause(ctx context.Context, p history.PromotionPause) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.Clean()
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO promotion_pauses (pipeline, stage, paused_by, reason, since) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (pipeline, stage) DO UPDATE SET paused_by = excluded.paused_by, reason = excluded.reason, since = excluded.since`,
			p.Pipeline, p.Stage, p.By, p.Reason, p.Since.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("pausing stage %s of pipeline %s: %w", p.Stage, p.Pipeline, err)
	}
	return nil
}

// DeletePromotionPause ends a stage's pause.
func (s *Store) DeletePromotionPause(ctx context.Context, pipeline, stage string) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM promotion_pauses WHERE pipeline = $1 AND stage = $2`, pipeline, stage)
		return err
	})
	if err != nil {
		return fmt.Errorf("resuming stage %s of pipeline %s: %w", stage, pipeline, err)
	}
	return nil
}

// PromotionPauses returns the pipeline's pauses, by stage.
func (s *Store) PromotionPauses(ctx context.Context, pipeline string) ([]history.PromotionPause, error) {
	var out []history.PromotionPause
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT stage, paused_by, reason, since FROM promotion_pauses WHERE pipeline = $1 ORDER BY stage COLLATE "C"`, pipeline)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.PromotionPause, error) {
			p := history.PromotionPause{Pipeline: pipeline}
			var since int64
			err := row.Scan(&p.Stage, &p.By, &p.Reason, &since)
			p.Since = time.Unix(0, since)
			return p, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the pauses of pipeline %s: %w", pipeline, err)
	}
	return out, nil
}

// PromotionPipelines lists the pipelines with promotion rows, sorted.
func (s *Store) PromotionPipelines(ctx context.Context) ([]string, error) {
	var out []string
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT pipeline FROM (SELECT pipeline FROM promotion_bundles UNION SELECT pipeline FROM promotion_records
			UNION SELECT pipeline FROM promotion_pauses) p ORDER BY pipeline COLLATE "C"`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing promotion pipelines: %w", err)
	}
	return out, nil
}
