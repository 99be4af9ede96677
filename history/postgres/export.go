package postgres

import (
	"context"
	"fmt"

	"github.com/fluxd/fluxd/history"
)

// exportPage is how many rows EachEvent and EachJob read at a time, so
// that no read stays open while fn writes elsewhere.
const exportPage = 1000

// EachEvent calls fn with every event of every instance, oldest first.
func (s *Store) EachEvent(ctx context.Context, fn func(history.Event) error) error {
	after := int64(0)
	for {
		var page []history.Event
		err := s.retry(ctx, func(ctx context.Context) error {
			rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events e WHERE e.id > $1 ORDER BY e.id LIMIT $2`, after, exportPage)
			if err != nil {
				return err
			}
			page, err = scanEvents(rows)
			return err
		})
		if err != nil {
			return fmt.Errorf("reading history: %w", err)
		}
		for _, ev := range page {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if len(page) < exportPage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// EachJob calls fn with every job of every instance, oldest first.
func (s *Store) EachJob(ctx context.Context, fn func(history.Job) error) error {
	after := int64(0)
	for {
		page, err := s.queryJobs(ctx, `SELECT `+jobColumns+` FROM jobs WHERE seq > $1 ORDER BY seq LIMIT $2`, after, exportPage)
		if err != nil {
			return fmt.Errorf("reading jobs: %w", err)
		}
		for _, j := range page {
			if err := fn(j); err != nil {
				return err
			}
		}
		if len(page) < exportPage {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// CachedRepositories lists the repositories the registry cache knows.
func (s *Store) CachedRepositories(ctx context.Context) ([]string, error) {
	var out []string
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT DISTINCT repository COLLATE "C" FROM registry_tags ORDER BY 1`)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = nil
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the registry cache: %w", err)
	}
	return out, nil
}
