package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// Connecting is a Store whose database may not be reachable yet: it
// connects in the background, retrying with backoff, and until then every
// call fails with ErrNotConnected (and the last connection error), so
// that fluxd serves, reports not ready, and carries on once the database
// is up.
type Connecting struct {
	ready  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	log *slog.Logger

	mu      sync.Mutex
	s       Store
	lastErr error
	// pingErr is the last failed Ping's detail, to log changes only.
	pingErr string
}

var _ Store = (*Connecting)(nil)

// ErrNotConnected says the database has not been reached yet.
var ErrNotConnected = errors.New("the history database is not connected yet")

// Start opens the daemon's store. A SQLite file is opened at once (a
// failure is a configuration error, returned). A PostgreSQL server is
// connected to in the background (see Connecting): a server that is down
// when fluxd starts is waited for, not a reason to exit.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Connecting, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Connecting{ready: make(chan struct{}), done: make(chan struct{}), log: log}
	kind, _, _ := Parse(cfg.URL)
	if kind == SQLite {
		s, err := Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		c.s, c.cancel = s, func() {}
		close(c.ready)
		close(c.done)
		return c, nil
	}
	// One attempt first, so that a server that is up is connected before
	// fluxd serves; the rest in the background.
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s, err := Open(octx, cfg)
	cancel()
	if err == nil {
		c.s, c.cancel = s, func() {}
		close(c.ready)
		close(c.done)
		return c, nil
	}
	log.Warn("cannot reach the history database; trying again in the background (fluxd reports not ready meanwhile)", "component", "history", "db", Redact(cfg.URL), "error", err)
	c.lastErr = err
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go c.connect(ctx, cfg, log)
	return c, nil
}

func (c *Connecting) connect(ctx context.Context, cfg Config, log *slog.Logger) {
	defer close(c.done)
	where := Redact(cfg.URL)
	// client-go's Backoff ends its steps once it reaches its Cap, so the
	// cap is kept here instead: tries go on, 30 s apart at most, until
	// Close.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32}
	for {
		d := backoff.Step()
		if backoff.Duration > 30*time.Second {
			backoff.Duration = 30 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := Open(octx, cfg)
		cancel()
		if err != nil {
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			if ctx.Err() == nil {
				log.Warn("cannot reach the history database; trying again (fluxd reports not ready meanwhile)", "component", "history", "db", where, "error", err, "next-try-within", backoff.Duration)
			}
			continue
		}
		c.mu.Lock()
		c.s, c.lastErr = s, nil
		c.mu.Unlock()
		close(c.ready)
		log.Info("connected to the history database", "component", "history", "db", where)
		return
	}
}

// Wait returns once the database is connected, or ctx ends.
func (c *Connecting) Wait(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Connecting) store() (Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s == nil {
		return nil, fmt.Errorf("%w: %v", ErrNotConnected, c.lastErr)
	}
	return c.s, nil
}

// Close stops connecting and closes the database.
func (c *Connecting) Close() error {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s == nil {
		return nil
	}
	return c.s.Close()
}

// Ping checks the database answers, for readiness. Its error says only
// that the database is not connected ("see fluxd's log"): it is shown by
// /readyz, which anyone who can reach the port may read, and the detail
// (the server's address, the user, the database, each driver's words) is
// logged instead, when it changes.
func (c *Connecting) Ping(ctx context.Context) error {
	s, err := c.store()
	if err == nil {
		err = s.Ping(ctx)
	}
	c.mu.Lock()
	changed := err != nil && err.Error() != c.pingErr
	if err != nil {
		c.pingErr = err.Error()
	} else {
		c.pingErr = ""
	}
	c.mu.Unlock()
	if err == nil {
		return nil
	}
	if changed && c.log != nil {
		c.log.Warn("history database: not ready", "component", "history", "error", err)
	}
	return notReady{err}
}

// notReady is a failed Ping: its text is generic, its detail unwraps.
type notReady struct{ err error }

func (notReady) Error() string   { return "history database: not connected (see fluxd's log)" }
func (e notReady) Unwrap() error { return e.err }

func (c *Connecting) Record(ctx context.Context, ev history.Event) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.Record(ctx, ev)
}

func (c *Connecting) Events(ctx context.Context, instance string, q history.Query) ([]history.Event, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.Events(ctx, instance, q)
}

func (c *Connecting) SaveJob(ctx context.Context, j history.Job) (int64, error) {
	s, err := c.store()
	if err != nil {
		return 0, err
	}
	return s.SaveJob(ctx, j)
}

func (c *Connecting) Job(ctx context.Context, instance, id string) (history.Job, error) {
	s, err := c.store()
	if err != nil {
		return history.Job{}, err
	}
	return s.Job(ctx, instance, id)
}

func (c *Connecting) Jobs(ctx context.Context, instance string, limit int) ([]history.Job, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.Jobs(ctx, instance, limit)
}

func (c *Connecting) LiveJobs(ctx context.Context) ([]history.Job, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.LiveJobs(ctx)
}

func (c *Connecting) AppendJobLog(ctx context.Context, l history.JobLogLine) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.AppendJobLog(ctx, l)
}

// AppendJobLogs stores lines at once when the store can (SQLite and
// PostgreSQL both can), else one by one.
func (c *Connecting) AppendJobLogs(ctx context.Context, lines []history.JobLogLine) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	if b, ok := s.(interface {
		AppendJobLogs(context.Context, []history.JobLogLine) error
	}); ok {
		return b.AppendJobLogs(ctx, lines)
	}
	for _, l := range lines {
		if err := s.AppendJobLog(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

func (c *Connecting) JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.JobLog(ctx, instance, id, after)
}

func (c *Connecting) CachedTags(ctx context.Context, repository string) (map[string]registry.CachedTag, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.CachedTags(ctx, repository)
}

func (c *Connecting) TagList(ctx context.Context, repository string) (registry.TagList, bool, error) {
	s, err := c.store()
	if err != nil {
		return registry.TagList{}, false, err
	}
	return s.TagList(ctx, repository)
}

func (c *Connecting) SaveTagList(ctx context.Context, repository string, l registry.TagList) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SaveTagList(ctx, repository, l)
}

func (c *Connecting) SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, images map[string]registry.ImageMeta, removed []string) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SaveTags(ctx, repository, tags, images, removed)
}

func (c *Connecting) EachEvent(ctx context.Context, fn func(history.Event) error) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.EachEvent(ctx, fn)
}

func (c *Connecting) EachJob(ctx context.Context, fn func(history.Job) error) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.EachJob(ctx, fn)
}

func (c *Connecting) CachedRepositories(ctx context.Context) ([]string, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.CachedRepositories(ctx)
}
