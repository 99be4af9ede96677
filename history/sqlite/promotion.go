package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// SavePromotionBundle stores b unless its pipeline has a bundle of its
// ID already (bundles never change; the first stays).
func (s *Store) SavePromotionBundle(ctx context.Context, b history.PromotionBundle) error {
	if err := b.Validate(); err != nil {
		return err
	}
	b = b.Clean()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO promotion_bundles (pipeline, id, created_at, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (pipeline, id) DO NOTHING`, b.Pipeline, b.ID, b.Created.UnixNano(), string(b.Data)); err != nil {
		return fmt.Errorf("storing bundle %s of pipeline %s: %w", b.ID, b.Pipeline, err)
	}
	return nil
}

// PromotionBundles returns the pipeline's bundles, oldest first.
func (s *Store) PromotionBundles(ctx context.Context, pipeline string) ([]history.PromotionBundle, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, created_at, data FROM promotion_bundles WHERE pipeline = ? ORDER BY created_at, id`, pipeline)
	if err != nil {
		return nil, fmt.Errorf("reading the bundles of pipeline %s: %w", pipeline, err)
	}
	defer rows.Close()
	out := []history.PromotionBundle{}
	for rows.Next() {
		b := history.PromotionBundle{Pipeline: pipeline}
		var created int64
		var data string
		if err := rows.Scan(&b.ID, &created, &data); err != nil {
			return nil, fmt.Errorf("reading the bundles of pipeline %s: %w", pipeline, err)
		}
		b.Created, b.Data = time.Unix(0, created), []byte(data)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the bundles of pipeline %s: %w", pipeline, err)
	}
	return out, nil
}

// PutPromotionRecord writes r if the stored record is at r.Version (0:
// none is stored). Each is one statement, which SQLite runs atomically,
// so of two writers from one version only one finds it.
func (s *Store) PutPromotionRecord(ctx context.Context, r history.PromotionRecord) (history.PromotionRecord, error) {
	if err := r.Validate(); err != nil {
		return history.PromotionRecord{}, err
	}
	r = r.Clean()
	if r.Updated.IsZero() {
		r.Updated = time.Now()
	}
	var (
		q    string
		args []any
	)
	if r.Version == 0 {
		q = `INSERT INTO promotion_records (pipeline, stage, bundle, version, updated_at, data) VALUES (?, ?, ?, 1, ?, ?)
			ON CONFLICT (pipeline, stage, bundle) DO NOTHING`
		args = []any{r.Pipeline, r.Stage, r.Bundle, r.Updated.UnixNano(), string(r.Data)}
	} else {
		q = `UPDATE promotion_records SET version = version + 1, updated_at = ?, data = ?
			WHERE pipeline = ? AND stage = ? AND bundle = ? AND version = ?`
		args = []any{r.Updated.UnixNano(), string(r.Data), r.Pipeline, r.Stage, r.Bundle, r.Version}
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return history.PromotionRecord{}, fmt.Errorf("storing bundle %s in stage %s of pipeline %s: %w", r.Bundle, r.Stage, r.Pipeline, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return history.PromotionRecord{}, fmt.Errorf("storing bundle %s in stage %s of pipeline %s: %w", r.Bundle, r.Stage, r.Pipeline, err)
	}
	if n == 0 {
		return history.PromotionRecord{}, r.Conflict()
	}
	r.Version++
	return r, nil
}

// PromotionRecords returns the pipeline's records, by stage and bundle.
func (s *Store) PromotionRecords(ctx context.Context, pipeline string) ([]history.PromotionRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT stage, bundle, version, updated_at, data FROM promotion_records WHERE pipeline = ? ORDER BY stage, bundle`, pipeline)
	if err != nil {
		return nil, fmt.Errorf("reading the promotion records of pipeline %s: %w", pipeline, err)
	}
	defer rows.Close()
	out := []history.PromotionRecord{}
	for rows.Next() {
		r := history.PromotionRecord{Pipeline: pipeline}
		var updated int64
		var data string
		if err := rows.Scan(&r.Stage, &r.Bundle, &r.Version, &updated, &data); err != nil {
			return nil, fmt.Errorf("reading the promotion records of pipeline %s: %w", pipeline, err)
		}
		r.Updated, r.Data = time.Unix(0, updated), []byte(data)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
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
	if _, err := s.db.ExecContext(ctx, `INSERT INTO promotion_pauses (pipeline, stage, paused_by, reason, since) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (pipeline, stage) DO UPDATE SET paused_by = excluded.paused_by, reason = excluded.reason, since = excluded.since`,
		p.Pipeline, p.Stage, p.By, p.Reason, p.Since.UnixNano()); err != nil {
		return fmt.Errorf("pausing stage %s of pipeline %s: %w", p.Stage, p.Pipeline, err)
	}
	return nil
}

// DeletePromotionPause ends a stage's pause.
func (s *Store) DeletePromotionPause(ctx context.Context, pipeline, stage string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM promotion_pauses WHERE pipeline = ? AND stage = ?`, pipeline, stage); err != nil {
		return fmt.Errorf("resuming stage %s of pipeline %s: %w", stage, pipeline, err)
	}
	return nil
}

// PromotionPauses returns the pipeline's pauses, by stage.
func (s *Store) PromotionPauses(ctx context.Context, pipeline string) ([]history.PromotionPause, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT stage, paused_by, reason, since FROM promotion_pauses WHERE pipeline = ? ORDER BY stage`, pipeline)
	if err != nil {
		return nil, fmt.Errorf("reading the pauses of pipeline %s: %w", pipeline, err)
	}
	defer rows.Close()
	out := []history.PromotionPause{}
	for rows.Next() {
		p := history.PromotionPause{Pipeline: pipeline}
		var since int64
		if err := rows.Scan(&p.Stage, &p.By, &p.Reason, &since); err != nil {
			return nil, fmt.Errorf("reading the pauses of pipeline %s: %w", pipeline, err)
		}
		p.Since = time.Unix(0, since)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the pauses of pipeline %s: %w", pipeline, err)
	}
	return out, nil
}

// PromotionPipelines lists the pipelines with promotion rows, sorted.
func (s *Store) PromotionPipelines(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT pipeline FROM promotion_bundles UNION SELECT pipeline FROM promotion_records
		UNION SELECT pipeline FROM promotion_pauses ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("listing promotion pipelines: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("listing promotion pipelines: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing promotion pipelines: %w", err)
	}
	return out, nil
}
