package web

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fluxd/fluxd/history"
)

// LiveStore is what a hub fed by the store needs (history.LiveLog).
type LiveStore interface {
	AppendLive(ctx context.Context, evs []history.LiveEvent) error
	LiveAfter(ctx context.Context, after int64, limit int) ([]history.LiveEvent, error)
	LastLive(ctx context.Context) (int64, error)
	PruneLive(ctx context.Context, before time.Time) (int64, error)
}

// Feed settings.
const (
	// outQueue bounds the events waiting to be written: beyond it (the
	// database slow or away) events are dropped, not held; a page that
	// misses some reads its views again on the next.
	outQueue = 1024
	// livePage is how many events the reader takes at a time.
	livePage = 500
	// liveKeep is how long the store keeps live events: long enough for
	// every replica's reader, which reads within a second.
	liveKeep = 10 * time.Minute
)

// UseStore makes the hub one stream for every replica: what this replica
// publishes is written to store, and every replica's hub (Run) reads the
// store's events into its rings, which become a cache of the store.
// Call it before Publish is used, and Run the hub.
func (h *Hub) UseStore(store LiveStore) *Hub {
	h.store = store
	h.out = make(chan history.LiveEvent, outQueue)
	h.wrote = make(chan struct{}, 1)
	return h
}

// send queues an event for the writer; a full queue drops it.
func (h *Hub) send(instance, typ string, data []byte) {
	select {
	case h.out <- history.LiveEvent{Instance: instance, Type: typ, Data: data, At: time.Now()}:
	default:
		atomic.AddInt64(&h.dropped, 1)
	}
}

// Run writes this replica's events to the store and reads every
// replica's from it, until ctx ends. wake, when not nil, says that
// events were stored (PostgreSQL's NOTIFY); without it the store is
// polled every poll.
func (h *Hub) Run(ctx context.Context, wake <-chan struct{}, poll time.Duration, log *slog.Logger) {
	if h.store == nil {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "web")
	go h.write(ctx, log)
	h.read(ctx, wake, poll, log)
}

// write stores queued events, in batches.
func (h *Hub) write(ctx context.Context, log *slog.Logger) {
	var failing bool
	for {
		var batch []history.LiveEvent
		select {
		case <-ctx.Done():
			return
		case ev := <-h.out:
			batch = append(batch, ev)
		}
	more:
		for len(batch) < livePage {
			select {
			case ev := <-h.out:
				batch = append(batch, ev)
			default:
				break more
			}
		}
		err := h.store.AppendLive(ctx, batch)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("storing live events for the status pages failed; they are dropped until it works again", "error", err)
			failing = true
		case err == nil:
			failing = false
			select {
			case h.wrote <- struct{}{}:
			default:
			}
		}
	}
}

// read delivers the store's events to the rings, from the newest at
// start (a page gets what happens from now on).
func (h *Hub) read(ctx context.Context, wake <-chan struct{}, poll time.Duration, log *slog.Logger) {
	var after int64
	for {
		var err error
		if after, err = h.store.LastLive(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		evs, err := h.store.LiveAfter(ctx, after, livePage)
		if err != nil && ctx.Err() == nil {
			log.Debug("reading live events failed", "error", err)
		}
		for _, ev := range evs {
			h.deliver(ev.Instance, ev.Type, ev.Data, nil)
			after = ev.ID
		}
		if len(evs) == livePage {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-h.wrote:
		case <-tick.C:
		case <-prune.C:
			if _, err := h.store.PruneLive(ctx, time.Now().Add(-liveKeep)); err != nil && ctx.Err() == nil {
				log.Debug("pruning live events failed", "error", err)
			}
		}
	}
}

// Dropped is how many events were not stored because the writer was
// behind.
func (h *Hub) Dropped() int64 { return atomic.LoadInt64(&h.dropped) }
