package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/notify"
)

// hit is one request a test receiver got.
type hit struct {
	Path   string
	Header http.Header
	Body   []byte
}

// recorder is a local HTTP receiver that keeps what it got; respond
// decides each answer (nil: 200).
type recorder struct {
	mu      sync.Mutex
	hits    []hit
	respond func(h hit, n int) int
	srv     *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := hit{Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: b}
		rec.mu.Lock()
		n := len(rec.hits)
		rec.hits = append(rec.hits, h)
		respond := rec.respond
		rec.mu.Unlock()
		code := http.StatusOK
		if respond != nil {
			code = respond(h, n)
		}
		if code == 0 { // hang until the client gives up
			<-r.Context().Done()
			return
		}
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) got() []hit {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hit(nil), rec.hits...)
}

// waitFor polls until cond holds (the sender works in the background).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fixture is a real SQLite store, a config file and a running Sender.
type fixture struct {
	store   *sqlite.Store
	path    string
	dir     string
	reg     *prometheus.Registry
	metrics *notify.Metrics
	logs    *syncBuffer
	cancel  context.CancelFunc
	done    chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFixture(t *testing.T, config string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	f.metrics = notify.NewMetrics(f.reg)
	f.path = writeFile(t, dir, "notify.yaml", strings.ReplaceAll(config, "DIR", dir))
	f.open(t)
	return f
}

func (f *fixture) open(t *testing.T) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(f.dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	t.Cleanup(func() { s.Close() })
}

// start runs a Sender (as a leader would) until stop.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := notify.NewWatcher(f.path, 50*time.Millisecond, f.metrics, log)
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	s := notify.NewSender(notify.SenderConfig{WebURL: "https://fluxd.example/", Poll: 20 * time.Millisecond,
		Backoff: wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 400 * time.Millisecond},
		Metrics: f.metrics, Log: log}, f.store, w)
	go w.Run(ctx)
	go func() { s.Run(ctx); close(f.done) }()
	t.Cleanup(f.stop)
}

func (f *fixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

// started waits until every receiver has its cursor (a new receiver
// starts at the newest notice: events before it are not its).
func (f *fixture) started(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		waitFor(t, "receiver "+n+" to start", func() bool {
			_, ok, _ := f.store.NoticeCursor(context.Background(), n)
			return ok
		})
	}
}

var release = history.Event{Instance: "team", Type: history.Release, User: "ann", Services: []string{"prod:deployment/web"},
	Changes: []history.Change{{Service: "prod:deployment/web", Container: "app", From: "reg.example/app:1.0", To: "reg.example/app:1.1"}},
	Commit:  "0123456789abcdef0123456789abcdef01234567", Job: "job-7", Message: "ship it"}

func (f *fixture) record(t *testing.T, ev history.Event) {
	t.Helper()
	if ev.EndedAt.IsZero() {
		ev.StartedAt, ev.EndedAt = time.Now(), time.Now()
	}
	if _, err := f.store.Record(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) notifyStarted(t *testing.T, ev history.Event) {
	t.Helper()
	if _, err := f.store.Notify(context.Background(), history.Notice{Event: ev, Started: true}); err != nil {
		t.Fatal(err)
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, b)
	}
	return m
}

// TestEachReceiverTypeGetsItsFormat sends a release (started, then
// succeeded) to one receiver of each type, each at a local HTTP server
// that checks what that type's documentation promises.
func TestEachReceiverTypeGetsItsFormat(t *testing.T) {
	rec := newRecorder(t)
	u := rec.srv.URL
	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: hook
    type: webhook
    url: %[1]s/hook
    secretFile: DIR/hmac
  - name: chat
    type: slack
    url: %[1]s/slack/T000/B000/XXXX
  - name: teams
    type: teams
    url: %[1]s/teams
  - name: discord
    type: discord
    secretFile: DIR/discord-url
  - name: gh
    type: github
    url: %[1]s/gh
    repository: org/manifests
    secretFile: DIR/gh-token
  - name: gl
    type: gitlab
    url: %[1]s/gl/api/v4
    repository: group/manifests
    secretFile: DIR/gl-token
  - name: gt
    type: gitea
    url: %[1]s/gitea/api/v1
    repository: org/manifests
    secretFile: DIR/gt-token
`, u))
	writeFile(t, f.dir, "hmac", "s3cret-key\n")
	writeFile(t, f.dir, "discord-url", u+"/discord/123/abc\n")
	writeFile(t, f.dir, "gh-token", "ghp_TOKEN\n")
	writeFile(t, f.dir, "gl-token", "glpat-TOKEN\n")
	writeFile(t, f.dir, "gt-token", "gitea-TOKEN\n")
	f.start(t)
	f.started(t, "hook", "chat", "teams", "discord", "gh", "gl", "gt")
	f.notifyStarted(t, release)
	f.record(t, release)
	// 4 message receivers and 3 forges, 2 notices each.
	waitFor(t, "14 deliveries", func() bool { return len(rec.got()) >= 14 })
	time.Sleep(100 * time.Millisecond)
	hits := rec.got()
	if len(hits) != 14 {
		t.Fatalf("got %d requests, want 14", len(hits))
	}
	by := map[string][]hit{}
	for _, h := range hits {
		if h.Header.Get(notify.HeaderEventID) == "" {
			t.Errorf("%s: no %s header", h.Path, notify.HeaderEventID)
		}
		key := strings.SplitN(strings.TrimPrefix(h.Path, "/"), "/", 2)[0]
		by[key] = append(by[key], h)
	}
	for key, hs := range by {
		if len(hs) != 2 || hs[0].Header.Get(notify.HeaderEventID) == hs[1].Header.Get(notify.HeaderEventID) {
			t.Errorf("%s: %d requests; want 2 with distinct event IDs", key, len(hs))
		}
	}

	t.Run("webhook", func(t *testing.T) {
		h := by["hook"][1]
		if got, want := h.Header.Get(notify.HeaderSignature), notify.Sign([]byte("s3cret-key"), h.Body); got != want || !strings.HasPrefix(got, "sha256=") {
			t.Errorf("signature %q, want %q", got, want)
		}
		m := decode(t, h.Body)
		if m["kind"] != "release.succeeded" || m["instance"] != "team" || m["commit"] != release.Commit || m["user"] != "ann" || m["job"] != "job-7" ||
			m["url"] != "https://fluxd.example/#/job/job-7" || m["id"] != h.Header.Get(notify.HeaderEventID) {
			t.Errorf("webhook body: %s", h.Body)
		}
		ch := m["changes"].([]any)[0].(map[string]any)
		if ch["from"] != "reg.example/app:1.0" || ch["to"] != "reg.example/app:1.1" || ch["service"] != "prod:deployment/web" {
			t.Errorf("webhook changes: %v", ch)
		}
		if decode(t, by["hook"][0].Body)["kind"] != "release.started" {
			t.Errorf("first webhook: %s", by["hook"][0].Body)
		}
	})
	t.Run("slack", func(t *testing.T) {
		m := decode(t, by["slack"][1].Body)
		text := m["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"].(string)
		for _, want := range []string{"release succeeded", "prod:deployment/web", "reg.example/app:1.0 → reg.example/app:1.1", "commit 0123456789ab", "<https://fluxd.example/#/job/job-7|Open in fluxd>"} {
			if !strings.Contains(text, want) {
				t.Errorf("slack text %q lacks %q", text, want)
			}
		}
		if s, _ := m["text"].(string); !strings.Contains(s, "release succeeded") {
			t.Errorf("slack fallback text %q", s)
		}
	})
	t.Run("teams", func(t *testing.T) {
		m := decode(t, by["teams"][1].Body)
		att := m["attachments"].([]any)[0].(map[string]any)
		card := att["content"].(map[string]any)
		if m["type"] != "message" || att["contentType"] != "application/vnd.microsoft.card.adaptive" || card["type"] != "AdaptiveCard" {
			t.Errorf("teams body: %s", by["teams"][1].Body)
		}
		if !strings.Contains(string(by["teams"][1].Body), "reg.example/app:1.1") {
			t.Errorf("teams card lacks the image: %s", by["teams"][1].Body)
		}
	})
	t.Run("discord", func(t *testing.T) {
		h := by["discord"][1]
		if h.Path != "/discord/123/abc" {
			t.Errorf("discord path %s: the URL from secretFile", h.Path)
		}
		m := decode(t, h.Body)
		e := m["embeds"].([]any)[0].(map[string]any)
		if !strings.Contains(e["title"].(string), "release succeeded") || e["url"] != "https://fluxd.example/#/job/job-7" || !strings.Contains(e["description"].(string), "reg.example/app:1.1") {
			t.Errorf("discord body: %s", h.Body)
		}
	})
	sha := release.Commit
	for _, tc := range []struct {
		key, path, authHeader, auth, nameField, failState string
	}{
		{"gh", "/gh/repos/org/manifests/statuses/" + sha, "Authorization", "token ghp_TOKEN", "context", ""},
		{"gl", "/gl/api/v4/projects/group%2Fmanifests/statuses/" + sha, "Private-Token", "glpat-TOKEN", "name", ""},
		{"gitea", "/gitea/api/v1/repos/org/manifests/statuses/" + sha, "Authorization", "token gitea-TOKEN", "context", ""},
	} {
		t.Run(tc.key, func(t *testing.T) {
			hs := by[tc.key]
			for i, want := range []string{"pending", "success"} {
				h := hs[i]
				if h.Path != tc.path || h.Header.Get(tc.authHeader) != tc.auth {
					t.Errorf("request %d: path %s (want %s), %s %q (want %q)", i, h.Path, tc.path, tc.authHeader, h.Header.Get(tc.authHeader), tc.auth)
				}
				m := decode(t, h.Body)
				if m["state"] != want || m[tc.nameField] != "fluxd/team" || m["target_url"] != "https://fluxd.example/#/job/job-7" {
					t.Errorf("request %d: body %s; want state %s, %s fluxd/team", i, h.Body, want, tc.nameField)
				}
			}
		})
	}
}

// TestForgeStatusFailure: a failed release sets "failure" (GitLab:
// "failed") on its commit; a lock sets none.
func TestForgeStatusFailure(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: gh
    type: github
    url: %[1]s
    repository: org/m
    secretFile: DIR/t
  - name: gl
    type: gitlab
    url: %[1]s
    repository: org/m
    secretFile: DIR/t
`, rec.srv.URL))
	writeFile(t, f.dir, "t", "tok")
	f.start(t)
	f.started(t, "gh", "gl")
	f.record(t, history.Event{Instance: "team", Type: history.Lock, User: "ann", Services: []string{"prod:deployment/web"}, Commit: "abc"})
	failed := release
	failed.Type, failed.Error = history.Failed, "rollout of prod:deployment/web did not finish"
	f.record(t, failed)
	waitFor(t, "2 statuses", func() bool { return len(rec.got()) >= 2 })
	time.Sleep(100 * time.Millisecond)
	states := map[string]string{}
	for _, h := range rec.got() {
		states[h.Header.Get("Private-Token")+h.Header.Get("Authorization")] = decode(t, h.Body)["state"].(string)
	}
	if len(rec.got()) != 2 || states["token tok"] != "failure" || states["tok"] != "failed" {
		t.Errorf("statuses %v from %d requests; want GitHub failure and GitLab failed, nothing for the lock", states, len(rec.got()))
	}
}

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
