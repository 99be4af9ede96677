package notify_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/notify"
)

// pageCounter is the store, noting the largest page of notices the
// Sender asked for.
type pageCounter struct {
	notify.Outbox
	mu      sync.Mutex
	largest int
}

func (p *pageCounter) Notices(ctx context.Context, after int64, limit int) ([]history.Notice, error) {
	p.mu.Lock()
	p.largest = max(p.largest, limit)
	p.mu.Unlock()
	return p.Outbox.Notices(ctx, after, limit)
}

// TestADownReceiverHoldsOnePage: thousands of notices wait for a
// receiver that is down; the Sender reads them a page at a time (it
// holds no more), and the queue depth and oldest age say how far behind
// the receiver is.
func TestADownReceiverHoldsOnePage(t *testing.T) {
	rec := newRecorder(t)
	rec.respond = func(hit, int) int { return http.StatusServiceUnavailable }
	f := newFixture(t, fmt.Sprintf("receivers:\n  - {name: hook, type: webhook, url: %s, secretFile: DIR/k}\n", rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	// The receiver's place: before everything below.
	if err := f.store.SetNoticeCursor(context.Background(), "hook", 0); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	old := time.Now().Add(-time.Hour)
	for i := range n {
		ev := release
		ev.Message = fmt.Sprint(i)
		ev.StartedAt, ev.EndedAt = old, old
		f.record(t, ev)
	}
	pc := &pageCounter{Outbox: f.store}
	reg := prometheus.NewRegistry()
	w, err := notify.NewWatcher(f.path, time.Hour, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := notify.NewSender(notify.SenderConfig{Poll: 10 * time.Millisecond, Metrics: notify.NewMetrics(reg),
		Backoff: wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Cap: 100 * time.Millisecond}}, pc, w)
	go s.Run(ctx)
	waitFor(t, "a few attempts", func() bool { return len(rec.got()) >= 3 })
	depth := gauge(t, reg, "fluxd_notify_queue_depth")
	age := gauge(t, reg, "fluxd_notify_oldest_age_seconds")
	if depth != n {
		t.Errorf("fluxd_notify_queue_depth = %v, want %d", depth, n)
	}
	if age < 3500 || age > 3700 {
		t.Errorf("fluxd_notify_oldest_age_seconds = %v, want about an hour", age)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.largest > 50 || pc.largest == 0 {
		t.Errorf("the Sender asked for pages of %d notices; it must hold at most 50", pc.largest)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
