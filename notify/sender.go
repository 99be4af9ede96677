package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/history"
)

// Outbox is what the Sender needs of the store (history.Outbox).
type Outbox interface {
	Notices(ctx context.Context, after int64, limit int) ([]history.Notice, error)
	LastNotice(ctx context.Context) (int64, error)
	NoticeCursor(ctx context.Context, receiver string) (int64, bool, error)
	SetNoticeCursor(ctx context.Context, receiver string, id int64) error
	PendingNotices(ctx context.Context, after int64) (int64, time.Time, error)
	PruneNotices(ctx context.Context, before time.Time) (int64, error)
}

// Receivers gives the current receivers and a channel closed when they
// change (*Watcher).
type Receivers interface {
	Config() (*Config, <-chan struct{})
}

// SenderConfig sets a Sender up.
type SenderConfig struct {
	// MaxAge: a notice older than this is dropped, not delivered
	// (default 24h); the outbox keeps notices this long.
	MaxAge time.Duration
	// WebURL is the status page's address, for links (optional).
	WebURL string
	// Poll is how often a receiver with nothing to send looks at the
	// outbox again (default 1s).
	Poll time.Duration
	// Backoff is the wait after a failed attempt, growing (with jitter)
	// up to its Cap (default 1s, doubling, to 5m).
	Backoff wait.Backoff
	// MaxRetryAfter bounds the wait a Retry-After asks for (default 1h).
	MaxRetryAfter time.Duration
	// Client sends the requests (default: a client of its own).
	Client  *http.Client
	Metrics *Metrics
	Log     *slog.Logger
}

// Sender delivers the outbox's notices to the receivers, each in order.
type Sender struct {
	cfg       SenderConfig
	store     Outbox
	receivers Receivers
}

// pageSize is how many notices a receiver reads at a time: all it holds.
const pageSize = 50

// NewSender returns a Sender over store.
func NewSender(cfg SenderConfig, store Outbox, receivers Receivers) *Sender {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Backoff.Duration <= 0 {
		cfg.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Cap: 5 * time.Minute}
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = time.Hour
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: sameHostRedirect}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = cfg.Log.With("component", "notify")
	return &Sender{cfg: cfg, store: store, receivers: receivers}
}

// Run delivers until ctx ends (the leadership is lost, fluxd stops): one
// worker per receiver, restarted with the new settings when the config
// changes; and the outbox pruned of notices older than MaxAge.
func (s *Sender) Run(ctx context.Context) {
	type worker struct {
		r      Receiver
		cancel context.CancelFunc
		done   chan struct{}
	}
	workers := map[string]*worker{}
	stop := func(w *worker) { w.cancel(); <-w.done; s.cfg.Metrics.forget(w.r.Name) }
	defer func() {
		for _, w := range workers {
			stop(w)
		}
	}()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	s.prune(ctx)
	for {
		cfg, changed := s.receivers.Config()
		want := map[string]Receiver{}
		for _, r := range cfg.Receivers {
			want[r.Name] = r
		}
		for name, w := range workers {
			if r, ok := want[name]; !ok || !r.same(w.r) {
				stop(w)
				delete(workers, name)
			}
		}
		for name, r := range want {
			if workers[name] != nil {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			w := &worker{r: r, cancel: cancel, done: make(chan struct{})}
			workers[name] = w
			go func() { defer close(w.done); s.deliverAll(wctx, &w.r) }()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-prune.C:
			s.prune(ctx)
		}
	}
}

func (s *Sender) prune(ctx context.Context) {
	n, err := s.store.PruneNotices(ctx, time.Now().Add(-s.cfg.MaxAge))
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("pruning the outbox failed", "error", err)
	} else if n > 0 {
		s.cfg.Log.Info("pruned old notices from the outbox", "notices", n, "older_than", s.cfg.MaxAge)
	}
}

// deliverAll gives r the outbox's notices after its cursor, in order,
// until ctx ends. A receiver seen for the first time starts at the
// newest notice: it is told of what happens from now on, not of the
// last day.
func (s *Sender) deliverAll(ctx context.Context, r *Receiver) {
	log := s.cfg.Log.With("receiver", r.Name, "type", string(r.Kind))
	var cursor int64
	for {
		var err error
		cursor, err = s.start(ctx, r.Name)
		if err == nil {
			break
		}
		log.Warn("cannot read the receiver's place in the outbox; trying again", "error", err)
		if !sleep(ctx, s.cfg.Poll*5) {
			return
		}
	}
	log.Info("delivering notifications", "after_notice", cursor)
	for ctx.Err() == nil {
		s.gauge(ctx, r.Name, cursor)
		page, err := s.store.Notices(ctx, cursor, pageSize)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("reading the outbox failed; trying again", "error", err)
			}
			sleep(ctx, s.cfg.Poll*5)
			continue
		}
		if len(page) == 0 {
			sleep(ctx, s.cfg.Poll)
			continue
		}
		for _, n := range page {
			if !s.deliver(ctx, r, n, log) {
				return
			}
			cursor = n.ID
			for s.store.SetNoticeCursor(ctx, r.Name, cursor) != nil {
				// Not moving on: a notice is sent again rather than
				// skipped when the store is away.
				if !sleep(ctx, s.cfg.Poll*5) {
					return
				}
			}
		}
	}
}

// start returns the receiver's cursor, setting a new receiver's to the
// newest notice.
func (s *Sender) start(ctx context.Context, name string) (int64, error) {
	cursor, ok, err := s.store.NoticeCursor(ctx, name)
	if err != nil || ok {
		return cursor, err
	}
	if cursor, err = s.store.LastNotice(ctx); err != nil {
		return 0, err
	}
	return cursor, s.store.SetNoticeCursor(ctx, name, cursor)
}

func (s *Sender) gauge(ctx context.Context, name string, cursor int64) {
	n, oldest, err := s.store.PendingNotices(ctx, cursor)
	if err != nil {
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	s.cfg.Metrics.queue(name, n, age)
}

// deliver gives n to r, trying again until r takes it, refuses it for
// good, or it grows too old; false when ctx ended first.
func (s *Sender) deliver(ctx context.Context, r *Receiver, n history.Notice, log *slog.Logger) bool {
	ev, ok := n.Event.For(r.view())
	if !ok {
		return true
	}
	n.Event = ev
	m, ok := newMessage(n, s.cfg.WebURL)
	if !ok || !r.wants(m) {
		return true
	}
	log = log.With("notice", m.ID, "kind", m.Kind)
	backoff := s.cfg.Backoff
	backoff.Steps = math.MaxInt32
	for attempt := 1; ; attempt++ {
		if age := time.Since(n.CreatedAt); age > s.cfg.MaxAge {
			s.cfg.Metrics.delivery(r.Name, OutcomeExpired)
			log.Warn("dropped a notice older than --notify-max-age, undelivered", "age", age.Round(time.Second), "attempts", attempt-1)
			return true
		}
		retryAfter, err := s.post(ctx, r, m)
		if ctx.Err() != nil {
			return false
		}
		var rejected *rejectedError
		switch {
		case err == nil:
			s.cfg.Metrics.delivery(r.Name, OutcomeDelivered)
			log.Info("notification delivered", "attempts", attempt)
			return true
		case errors.As(err, &rejected):
			s.cfg.Metrics.delivery(r.Name, OutcomeRejected)
			log.Error("the receiver refused the notification for good; going on with the next", "error", err)
			return true
		}
		s.cfg.Metrics.delivery(r.Name, OutcomeFailed)
		wait := backoff.Step()
		if retryAfter > 0 {
			wait = min(retryAfter, s.cfg.MaxRetryAfter)
		}
		log.Warn("delivering a notification failed; trying again", "error", err, "attempt", attempt, "retry_in", wait.Round(time.Millisecond))
		if !sleep(ctx, wait) {
			return false
		}
	}
}

// rejectedError is a refusal that sending again would not change.
type rejectedError struct{ status int }

func (e *rejectedError) Error() string {
	return fmt.Sprintf("HTTP %d %s (the request was refused as malformed; check the receiver's type, url and repository)", e.status, http.StatusText(e.status))
}

// post sends one attempt. Its errors never quote the URL (a chat
// webhook's URL is its secret) nor the response body (it might echo the
// token).
func (s *Sender) post(ctx context.Context, r *Receiver, m *Message) (retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	req, err := r.request(ctx, m)
	if err != nil {
		return 0, err
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %v (the receiver's timeout)", r.Timeout)
		}
		return 0, fmt.Errorf("sending: %v", redactURL(err.Error(), r.URL))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, nil
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
		return 0, &rejectedError{status: code}
	default:
		return parseRetryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("HTTP %d %s", code, http.StatusText(code))
	}
}

// redactURL removes the URL from an error's text, should it appear.
func redactURL(s, u string) string {
	if u == "" {
		return s
	}
	return strings.ReplaceAll(s, u, "[receiver url]")
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sameHostRedirect follows a receiver's redirects on its own host only:
// Go drops Authorization on a redirect to another host, but not the
// other headers a secret travels in (GitLab's PRIVATE-TOKEN, a webhook's
// signature), so a receiver must not send them elsewhere.
func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("refusing a redirect to another host (%s): a receiver's credentials go only to its own", req.URL.Host)
	}
	return nil
}
