package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/notify"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
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
