package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxd/fluxd/history"
)

// errAmbiguous marks a failure whose outcome is unknown (the connection
// dropped while COMMIT was on its way): retry never runs such an operation
// again. Record needs no such care any more (its key makes a second run
// find the first one's event), but an operation that is not idempotent
// must wrap its COMMIT's error with it.
var errAmbiguous = errors.New("the database went away while committing; the change may or may not be stored")

// Record stores ev and returns its ID. ev.Instance is required. A failed
// connection is tried again (see retry), even during COMMIT: each call
// draws a key of its own (record_key, unique), so a second attempt after a
// COMMIT that did happen finds that event and returns its ID instead of
// storing the event twice.
func (s *Store) Record(ctx context.Context, ev history.Event) (int64, error) {
	if ev.Instance == "" {
		return 0, errors.New("recording an event without an instance")
	}
	ev = ev.Clean()
	changes := []byte("[]")
	if ev.Changes != nil {
		var err error
		if changes, err = json.Marshal(ev.Changes); err != nil {
			return 0, err
		}
	}
	sync, err := history.EncodeSync(ev.Sync)
	if err != nil {
		return 0, err
	}
	if ev.StartedAt.IsZero() {
		ev.StartedAt = time.Now()
	}
	if ev.EndedAt.IsZero() {
		ev.EndedAt = ev.StartedAt
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := hex.EncodeToString(raw[:])
	var id int64
	err = s.retry(ctx, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		err = tx.QueryRow(ctx,
			`INSERT INTO events (instance, type, "user", message, changes, commit_id, error, started_at, ended_at, record_key, sync)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (record_key) DO NOTHING RETURNING id`,
			ev.Instance, string(ev.Type), ev.User, ev.Message, string(changes), ev.Commit, ev.Error,
			ev.StartedAt.UnixNano(), ev.EndedAt.UnixNano(), key, sync).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			// An earlier attempt committed: its event (and services) are
			// stored already.
			return tx.QueryRow(ctx, `SELECT id FROM events WHERE record_key = $1`, key).Scan(&id)
		}
		if err != nil {
			return err
		}
		// The event's services in one statement: a round trip per
		// service made a 2,000-service sync event 2,000 round trips
		// (0.27 s on loopback, 40 s with the store 20 ms away;
		// docs/performance.md, "Where the store becomes the limit").
		if len(ev.Services) > 0 {
			if _, err := tx.Exec(ctx,
				`INSERT INTO event_services (event_id, instance, service)
				 SELECT $1, $2, s FROM unnest($3::text[]) AS s ON CONFLICT DO NOTHING`,
				id, ev.Instance, ev.Services); err != nil {
				return err
			}
		}
		// The event's notice, in its transaction.
		nev := ev
		nev.ID = id
		if _, err := addNotice(ctx, tx, history.Notice{Event: nev, CreatedAt: ev.EndedAt}); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, fmt.Errorf("recording history: %w", err)
	}
	return id, nil
}

const eventColumns = `e.id, e.instance, e.type, e."user", e.message, e.changes, e.commit_id, e.error, e.started_at, e.ended_at, e.sync,
	COALESCE((SELECT string_agg(s.service, E'\n' ORDER BY s.service COLLATE "C") FROM event_services s WHERE s.event_id = e.id), '')`

// Events returns the instance's events matching q, newest first.
func (s *Store) Events(ctx context.Context, instance string, q history.Query) ([]history.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	args := []any{instance, limit}
	var filters string
	if q.Type != "" {
		args = append(args, string(q.Type))
		filters += fmt.Sprintf(` AND e.type = $%d`, len(args))
	}
	if q.User != "" {
		args = append(args, q.User)
		filters += fmt.Sprintf(` AND strpos(lower(e."user"), lower($%d)) > 0`, len(args))
	}
	if !q.Since.IsZero() {
		args = append(args, q.Since.UnixNano())
		filters += fmt.Sprintf(` AND e.ended_at >= $%d`, len(args))
	}
	if !q.Until.IsZero() {
		args = append(args, q.Until.UnixNano())
		filters += fmt.Sprintf(` AND e.ended_at < $%d`, len(args))
	}
	query := `SELECT ` + eventColumns + ` FROM events e WHERE e.instance = $1` + filters + ` ORDER BY e.id DESC LIMIT $2`
	if q.Service != "" {
		// From the service's index to its events, newest first.
		args = append(args, q.Service)
		query = `SELECT ` + eventColumns + ` FROM event_services f JOIN events e ON e.id = f.event_id
			WHERE f.instance = $1 AND f.service = $` + fmt.Sprint(len(args)) + filters + ` ORDER BY f.event_id DESC LIMIT $2`
	}
	var out []history.Event
	err := s.retry(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = scanEvents(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading history: %w", err)
	}
	return out, nil
}

func scanEvents(rows pgx.Rows) ([]history.Event, error) {
	defer rows.Close()
	out := []history.Event{}
	for rows.Next() {
		var (
			ev                     history.Event
			typ, changes, services string
			sync                   string
			started, ended         int64
		)
		if err := rows.Scan(&ev.ID, &ev.Instance, &typ, &ev.User, &ev.Message, &changes, &ev.Commit, &ev.Error, &started, &ended, &sync, &services); err != nil {
			return nil, err
		}
		ev.Type = history.Type(typ)
		ev.StartedAt, ev.EndedAt = time.Unix(0, started), time.Unix(0, ended)
		if services != "" {
			ev.Services = strings.Split(services, "\n")
		}
		if err := json.Unmarshal([]byte(changes), &ev.Changes); err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.ID, err)
		}
		var err error
		if ev.Sync, err = history.DecodeSync(sync); err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.ID, err)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}
