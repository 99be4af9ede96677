package history

import (
	"context"
	"time"
)

// LiveEvent is one event of the status page's live stream (a job's
// progress, a log line, an automator pass, a registry push), kept briefly
// in the store so that every replica's page streams the same events: the
// leader writes them, every replica reads them (PostgreSQL tells the
// readers with NOTIFY; SQLite's are polled).
type LiveEvent struct {
	// ID orders the stream; IDs grow, and a reader that has seen one has
	// seen every one before it (writers commit in ID order).
	ID int64
	// Instance is the tenant whose event it is; "" is everyone's.
	Instance string
	// Type is the page's event name: job, log, notify, automation.
	Type string
	// Data is the event's JSON.
	Data []byte
	At   time.Time
}

// LiveLog keeps the live stream for a short while.
type LiveLog interface {
	// AppendLive stores events, in order.
	AppendLive(ctx context.Context, evs []LiveEvent) error
	// LiveAfter returns at most limit events after after, oldest first.
	LiveAfter(ctx context.Context, after int64, limit int) ([]LiveEvent, error)
	// LastLive is the newest event's ID (0: none).
	LastLive(ctx context.Context) (int64, error)
	// PruneLive deletes the events stored before before.
	PruneLive(ctx context.Context, before time.Time) (int64, error)
}
