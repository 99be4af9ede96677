package notify_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/notify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestReceiverFailsThenRecovers: the receiver answers 500, then does not
// answer within its timeout, then 429 with Retry-After, then takes the
// notice; the next notice follows, in order, each delivered once.
func TestReceiverFailsThenRecovers(t *testing.T) {
	rec := newRecorder(t)
	var retryAfterAt time.Time
	rec.respond = func(h hit, n int) int {
		switch n {
		case 0:
			return http.StatusInternalServerError
		case 1:
			return 0 // no answer: the receiver's timeout ends it
		case 2:
			retryAfterAt = time.Now()
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	}
	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: hook
    type: webhook
    url: %s/hook
    secretFile: DIR/k
    timeout: 300ms
`, rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "hook")
	first := release
	f.record(t, first)
	second := release
	second.Type, second.Commit = history.Lock, "fedcba"
	f.record(t, second)
	waitFor(t, "both delivered", func() bool { return len(rec.got()) >= 5 })
	time.Sleep(200 * time.Millisecond)
	hits := rec.got()
	if len(hits) != 5 {
		t.Fatalf("%d requests, want 5 (3 failed attempts, then 2 deliveries)", len(hits))
	}
	id := hits[0].Header.Get(notify.HeaderEventID)
	for i := range 4 {
		if got := hits[i].Header.Get(notify.HeaderEventID); got != id || decode(t, hits[i].Body)["kind"] != "release.succeeded" {
			t.Errorf("attempt %d: event %s kind %v; want the first notice (%s) again", i, got, decode(t, hits[i].Body)["kind"], id)
		}
	}
	if decode(t, hits[4].Body)["kind"] != "lock" || hits[4].Header.Get(notify.HeaderEventID) == id {
		t.Errorf("last delivery: %s; want the lock, after the release", hits[4].Body)
	}
	// Retry-After: 1 was honoured (the back-off alone would wait well
	// under a second).
	if gap := time.Since(retryAfterAt); gap < time.Second {
		t.Errorf("the attempt after Retry-After: 1 came %v later", gap)
	}
	if got := testutil.ToFloat64(counter(t, f.reg, "failed")); got != 3 {
		t.Errorf("fluxd_notify_deliveries_total{outcome=failed} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(counter(t, f.reg, "delivered")); got != 2 {
		t.Errorf("fluxd_notify_deliveries_total{outcome=delivered} = %v, want 2", got)
	}
}

// counter is fluxd_notify_deliveries_total{receiver=hook, outcome}.
func counter(t *testing.T, reg *prometheus.Registry, outcome string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fluxd_notify_deliveries_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == outcome {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	})
}

type collectorFunc func() float64

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("v", "v", nil, nil)
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("v", "v", nil, nil), prometheus.GaugeValue, c())
}

// TestUndeliveredSurviveARestart: notices recorded while the receiver is
// down are delivered by the next Sender on the same database, in order,
// none skipped.
func TestUndeliveredSurviveARestart(t *testing.T) {
	rec := newRecorder(t)
	var mu sync.Mutex
	down := true
	rec.respond = func(hit, int) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	f := newFixture(t, fmt.Sprintf("receivers:\n  - {name: hook, type: webhook, url: %s, secretFile: DIR/k}\n", rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "hook")
	for i := range 3 {
		ev := release
		ev.Message = fmt.Sprint("release ", i)
		f.record(t, ev)
	}
	waitFor(t, "an attempt", func() bool { return len(rec.got()) > 0 })
	f.stop()
	f.store.Close()
	mu.Lock()
	down = false
	mu.Unlock()
	f.open(t)
	f.start(t)
	waitFor(t, "three deliveries", func() bool { return delivered(rec, 3) })
	var got []string
	for _, h := range rec.got()[len(rec.got())-3:] {
		got = append(got, decode(t, h.Body)["message"].(string))
	}
	if strings.Join(got, ",") != "release 0,release 1,release 2" {
		t.Errorf("delivered after the restart: %v", got)
	}
}

// delivered says whether the last n requests' event IDs are n distinct
// ones answered after the receiver came back.
func delivered(rec *recorder, n int) bool {
	hits := rec.got()
	seen := map[string]bool{}
	for _, h := range hits {
		seen[h.Header.Get(notify.HeaderEventID)] = true
	}
	return len(seen) >= n && len(hits) >= n
}

// TestOldNoticesExpire: a notice older than MaxAge is dropped and
// counted, and the next one is delivered.
func TestOldNoticesExpire(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf("receivers:\n  - {name: hook, type: webhook, url: %s, secretFile: DIR/k}\n", rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "hook")
	old := release
	old.StartedAt, old.EndedAt = time.Now().Add(-25*time.Hour), time.Now().Add(-25*time.Hour)
	old.Message = "old"
	f.record(t, old)
	f.record(t, release)
	waitFor(t, "a delivery", func() bool { return len(rec.got()) >= 1 })
	time.Sleep(100 * time.Millisecond)
	if hits := rec.got(); len(hits) != 1 || decode(t, hits[0].Body)["message"] != "ship it" {
		t.Errorf("delivered %d: want only the new release", len(hits))
	}
	if got := testutil.ToFloat64(counter(t, f.reg, "expired")); got != 1 {
		t.Errorf("expired = %v, want 1", got)
	}
}

// TestFilters: events and services filters pick what a receiver gets.
func TestFilters(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf(`receivers:
  - {name: failures, type: webhook, url: %[1]s/failures, secretFile: DIR/k, events: [failure]}
  - {name: prod, type: webhook, url: %[1]s/prod, secretFile: DIR/k, services: ["prod:*"]}
  - {name: locks, type: webhook, url: %[1]s/locks, secretFile: DIR/k, events: [lock]}
`, rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "failures", "prod", "locks")
	f.record(t, release) // prod: release
	staging := release
	staging.Services = []string{"staging:deployment/web"}
	staging.Type, staging.Error = history.Failed, "rollout timed out"
	f.record(t, staging)                                                                                                    // failures
	f.record(t, history.Event{Instance: "team", Type: history.Lock, User: "bob", Services: []string{"prod:deployment/db"}}) // prod, locks
	waitFor(t, "4 deliveries", func() bool { return len(rec.got()) >= 4 })
	time.Sleep(150 * time.Millisecond)
	got := map[string][]string{}
	for _, h := range rec.got() {
		got[h.Path] = append(got[h.Path], decode(t, h.Body)["kind"].(string))
	}
	want := map[string][]string{"/failures": {"release.failed"}, "/prod": {"release.succeeded", "lock"}, "/locks": {"lock"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
}

// TestSecretsStayOutOfLogsAndMetrics: a Slack URL (its secret) and a
// forge token never appear in the log or the metrics while deliveries
// fail.
func TestSecretsStayOutOfLogsAndMetrics(t *testing.T) {
	rec := newRecorder(t)
	rec.respond = func(hit, int) int { return http.StatusUnauthorized }
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused
	f := newFixture(t, fmt.Sprintf(`receivers:
  - {name: chat, type: slack, url: "%[2]s/services/T0/B0/SLACKSECRET"}
  - {name: gh, type: github, url: %[1]s, repository: o/r, secretFile: DIR/tok}
`, rec.srv.URL, closed.URL))
	writeFile(t, f.dir, "tok", "ghp_FORGESECRET")
	f.start(t)
	f.started(t, "chat", "gh")
	f.record(t, release)
	waitFor(t, "failures of both", func() bool {
		return strings.Count(f.logs.String(), "delivering a notification failed") >= 4
	})
	var metrics bytes.Buffer
	mfs, _ := f.reg.Gather()
	for _, mf := range mfs {
		fmt.Fprintln(&metrics, mf.String())
	}
	for _, secret := range []string{"SLACKSECRET", "FORGESECRET"} {
		if strings.Contains(f.logs.String(), secret) {
			t.Errorf("the log holds %s:\n%s", secret, f.logs.String())
		}
		if strings.Contains(metrics.String(), secret) {
			t.Errorf("the metrics hold %s", secret)
		}
	}
	if !strings.Contains(f.logs.String(), "HTTP 401") {
		t.Errorf("the log does not say why the forge failed:\n%s", f.logs.String())
	}
}

// The automator's notice of a newer image skipped for its signatures
// (a notice without a history row) reaches the receivers of category
// automation as automation.unverified-skipped, saying which image and
// why; a receiver of releases only is not told.
func TestUnverifiedSkippedNotice(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf(`receivers:
  - {name: auto, type: webhook, url: %[1]s/auto, secretFile: DIR/k, events: [automation]}
  - {name: releases, type: webhook, url: %[1]s/releases, secretFile: DIR/k, events: [release]}
`, rec.srv.URL))
	writeFile(t, f.dir, "k", "key")
	f.start(t)
	f.started(t, "auto", "releases")
	msg := "container app: skipped r/app:1.4.0 (sha256:14), newer than what runs: unsigned: profile signed: unsigned"
	if _, err := f.store.Notify(context.Background(), history.Notice{Event: history.Event{Instance: "team", Type: history.UnverifiedSkipped,
		Services: []string{"default:deployment/app"}, User: "automator", Message: msg, EndedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	f.record(t, release) // the releases receiver's, to know delivery has gone past the notice
	waitFor(t, "2 deliveries", func() bool { return len(rec.got()) >= 2 })
	time.Sleep(150 * time.Millisecond)
	got := map[string][]string{}
	for _, h := range rec.got() {
		body := decode(t, h.Body)
		got[h.Path] = append(got[h.Path], body["kind"].(string))
		if h.Path == "/auto" && (body["message"] != msg || fmt.Sprint(body["categories"]) != "[automation]") {
			t.Errorf("auto got %v, want the skip's message in category automation", body)
		}
	}
	want := map[string][]string{"/auto": {"automation.unverified-skipped"}, "/releases": {"release.succeeded"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
}

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
