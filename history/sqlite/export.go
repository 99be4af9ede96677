package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fluxd/fluxd/history"
)

var _ history.Exporter = (*Store)(nil)

// exportPage is how many rows EachEvent and EachJob read at a time, so
// that no read stays open while fn writes elsewhere.
const exportPage = 1000

// EachEvent calls fn with every event of every instance, oldest first.
func (s *Store) EachEvent(ctx context.Context, fn func(history.Event) error) error {
	after := int64(0)
	for {
		rows, err := s.db.QueryContext(ctx, `SELECT e.id, e.instance, e.type, e.user, e.message, e.changes, e.commit_id, e.error, e.started_at, e.ended_at, e.sync,
	                 COALESCE((SELECT group_concat(service, char(10)) FROM event_services s WHERE s.event_id = e.id), '')
	          FROM events e WHERE e.id > ? ORDER BY e.id LIMIT ?`, after, exportPage)
		if err != nil {
			return fmt.Errorf("reading history: %w", err)
		}
		var page []history.Event
		for rows.Next() {
			var (
				ev                     history.Event
				typ, changes, services string
				sync                   string
				started, ended         int64
			)
			if err := rows.Scan(&ev.ID, &ev.Instance, &typ, &ev.User, &ev.Message, &changes, &ev.Commit, &ev.Error, &started, &ended, &sync, &services); err != nil {
				rows.Close()
				return fmt.Errorf("reading history: %w", err)
			}
			ev.Type, ev.StartedAt, ev.EndedAt = history.Type(typ), time.Unix(0, started), time.Unix(0, ended)
			if services != "" {
				ev.Services = strings.Split(services, "\n")
			}
			if err := json.Unmarshal([]byte(changes), &ev.Changes); err != nil {
				rows.Close()
				return fmt.Errorf("reading history event %d: %w", ev.ID, err)
			}
			var err error
			if ev.Sync, err = history.DecodeSync(sync); err != nil {
				rows.Close()
				return fmt.Errorf("reading history event %d: %w", ev.ID, err)
			}
			page = append(page, ev)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
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
		rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`, after, exportPage)
		if err != nil {
			return fmt.Errorf("reading jobs: %w", err)
		}
		page, err := scanJobs(rows)
		if err != nil {
			return err
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
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT repository FROM registry_tags ORDER BY repository`)
	if err != nil {
		return nil, fmt.Errorf("reading the registry cache: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
