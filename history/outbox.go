package history

import (
	"context"
	"time"
)

// Notice is one entry of the outbox: something that happened, for the
// notification receivers (internal notify package) to be told. Record writes
// one for every event it stores, in the same transaction as the event's
// row, so that a recorded event is never missed and a notice never names
// an event that was not stored. A release that begins rolling out has no
// history row (its row is written when it ends): Notify stores its notice
// alone.
type Notice struct {
	// ID orders the outbox; IDs grow with every notice.
	ID int64
	// Event is what happened. Its ID is the history row's (0 for a
	// notice without one).
	Event Event
	// Started marks a release that began rolling out its commit (the
	// commit status "pending"), rather than one that ended.
	Started bool
	// CreatedAt is when the notice was stored.
	CreatedAt time.Time
}

// Outbox keeps the notices to send and how far each receiver has got.
// Receivers are named by the notification config; a cursor is the ID of
// the last notice the receiver was given (or skipped), so that delivery
// goes on where it stopped after a restart or on a new leader.
type Outbox interface {
	// Notify stores a notice that has no history row and returns its ID.
	Notify(ctx context.Context, n Notice) (int64, error)
	// Notices returns at most limit notices after the ID after, oldest
	// first.
	Notices(ctx context.Context, after int64, limit int) ([]Notice, error)
	// LastNotice is the newest notice's ID (0: none).
	LastNotice(ctx context.Context) (int64, error)
	// NoticeCursor returns receiver's cursor; ok is false when the
	// receiver has none yet.
	NoticeCursor(ctx context.Context, receiver string) (id int64, ok bool, err error)
	// SetNoticeCursor moves receiver's cursor to id (never back).
	SetNoticeCursor(ctx context.Context, receiver string, id int64) error
	// PendingNotices counts the notices after after and says when the
	// oldest of them was stored (zero time: none).
	PendingNotices(ctx context.Context, after int64) (n int64, oldest time.Time, err error)
	// PruneNotices deletes the notices stored before before.
	PruneNotices(ctx context.Context, before time.Time) (int64, error)
}
