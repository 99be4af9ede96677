package daemon

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// readyEvery is how often readiness is computed at most: every caller in
// between (probes, health checks without a token, Watch streams,
// /readyz) shares the last answer, so that a flood of unauthenticated
// checks costs at most one database ping a second.
const readyEvery = time.Second

// readiness is Ready's shared answer.
type readiness struct {
	mu  sync.Mutex
	at  time.Time
	err error
	sf  singleflight.Group
	// ttl, when set, replaces readyEvery (tests: -1 shares nothing).
	ttl time.Duration
}

func (r *readiness) every() time.Duration {
	if r.ttl != 0 {
		return r.ttl
	}
	return readyEvery
}

// readyShared is Ready, computed at most once per readyEvery and shared
// by concurrent callers. The computation does not end with a caller that
// goes away: the others wait on it.
func (d *Daemon) readyShared(ctx context.Context) error {
	r := &d.ready
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < r.every() {
		err := r.err
		r.mu.Unlock()
		return err
	}
	r.mu.Unlock()
	ch := r.sf.DoChan("ready", func() (any, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := d.Ready(cctx)
		r.mu.Lock()
		r.at, r.err = time.Now(), err
		r.mu.Unlock()
		return nil, err
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// healthWatch is one ticker for every health Watch stream: it checks
// readiness every h.every while anyone watches, and wakes the streams on
// a change.
type healthWatch struct {
	mu       sync.Mutex
	st       healthpb.HealthCheckResponse_ServingStatus
	changed  chan struct{} // closed, and replaced, when st changes
	watchers int
	stop     context.CancelFunc
}

// subscribe adds a watcher, starting the ticker for the first; the
// returned function removes it, stopping the ticker after the last.
func (h *healthServer) subscribe() func() {
	w := &h.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchers++
	if w.watchers == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		w.stop = cancel
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		go h.tick(ctx)
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watchers--
		if w.watchers == 0 {
			w.stop()
		}
	}
}

// tick checks readiness every h.every until ctx ends, and tells the
// watchers of each change.
func (h *healthServer) tick(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		st := h.status(ctx)
		w := &h.watch
		w.mu.Lock()
		if st != w.st && ctx.Err() == nil {
			w.st = st
			close(w.changed)
			w.changed = make(chan struct{})
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// current is the shared status and the channel closed at its next
// change.
func (h *healthServer) current() (healthpb.HealthCheckResponse_ServingStatus, chan struct{}) {
	w := &h.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.st, w.changed
}
