package store

import (
	"context"
	"time"

	"github.com/fluxd/fluxd/history"
)

// The outbox, passed on to the store once it is connected.

func (c *Connecting) Notify(ctx context.Context, n history.Notice) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.Notify(ctx, n)
}

func (c *Connecting) Notices(ctx context.Context, after int64, limit int) ([]history.Notice, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.Notices(ctx, after, limit)
}

func (c *Connecting) LastNotice(ctx context.Context) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.LastNotice(ctx)
}

func (c *Connecting) NoticeCursor(ctx context.Context, receiver string) (int64, bool, error) {
	s, err := c.store()
	if err != nil {
		return 0, false, err
	}
	return s.NoticeCursor(ctx, receiver)
}

func (c *Connecting) SetNoticeCursor(ctx context.Context, receiver string, id int64) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SetNoticeCursor(ctx, receiver, id)
}

func (c *Connecting) PendingNotices(ctx context.Context, after int64) (int64, time.Time, error) {
	s, err := c.store()
	if err != nil {
		return 0, time.Time{}, err
	}
	return s.PendingNotices(ctx, after)
}

func (c *Connecting) PruneNotices(ctx context.Context, before time.Time) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.PruneNotices(ctx, before)
}

// The live stream, passed on likewise.

func (c *Connecting) AppendLive(ctx context.Context, evs []history.LiveEvent) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.AppendLive(ctx, evs)
}

func (c *Connecting) LiveAfter(ctx context.Context, after int64, limit int) ([]history.LiveEvent, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.LiveAfter(ctx, after, limit)
}

func (c *Connecting) LastLive(ctx context.Context) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.LastLive(ctx)
}

func (c *Connecting) PruneLive(ctx context.Context, before time.Time) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.PruneLive(ctx, before)
}

// WaitLive is the PostgreSQL store's LISTEN for new live events; nil for
// SQLite (poll) or while the database is not connected.
func (c *Connecting) WaitLive(ctx context.Context) <-chan struct{} {
	s, err := c.store()
	if err != nil {
		return nil
	}
	if w, ok := s.(interface {
		WaitLive(context.Context) <-chan struct{}
	}); ok {
		return w.WaitLive(ctx)
	}
	return nil
}

// The web sessions, passed on likewise.

func (c *Connecting) SaveSession(ctx context.Context, se history.WebSession, perToken, max int) (bool, error) {
	s, err := c.store()
	if err != nil {
		return false, err
	}
	return s.SaveSession(ctx, se, perToken, max)
}

func (c *Connecting) Session(ctx context.Context, id string) (history.WebSession, error) {
	s, err := c.store()
	if err != nil {
		return history.WebSession{}, err
	}
	return s.Session(ctx, id)
}

func (c *Connecting) DeleteSession(ctx context.Context, id string) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.DeleteSession(ctx, id)
}
