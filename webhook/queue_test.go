package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const pushOfApp = `{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}}]}`

// blockingRefresh stands for a registry that takes its time: each refresh
// reports its start, then waits until released.
type blockingRefresh struct {
	mu      sync.Mutex
	count   int
	started chan string
	release chan struct{}
}

func newBlockingRefresh() *blockingRefresh {
	return &blockingRefresh{started: make(chan string, 100), release: make(chan struct{})}
}

func (b *blockingRefresh) refresh(ctx context.Context, image string) error {
	b.mu.Lock()
	b.count++
	b.mu.Unlock()
	b.started <- image
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}

func (b *blockingRefresh) refreshes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}

// refreshNothing is a Refresher that watches every repository and
// refreshes nothing: the daemon's webhook_test runs the handler over a
// real daemon.
type refreshNothing struct{}

func (refreshNothing) RefuseUnwatched(context.Context, string) error { return nil }
func (refreshNothing) RefreshNotified(context.Context, string) error { return nil }

func newTestWebhook(t *testing.T) *Handler {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	q := workqueue.NewTyped[string]()
	t.Cleanup(q.ShutDown)
	h, err := New(refreshNothing{}, q, []byte("s3cret"), log)
	if err != nil {
		t.Fatal(err)
	}
	// These tests are about the queue: every repository counts as
	// watched (the daemon's ssrf_test, security_test and webhook_test
	// check the refusal).
	h.watched = func(context.Context, string) error { return nil }
	return h
}

func notify(t *testing.T, h http.Handler, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// The handler answers at once, while the refresh it asked for is still
// running; fifty more notifications of the same repository meanwhile
// make one more refresh, not fifty.
func TestWebhookAnswersAtOnceAndCoalesces(t *testing.T) {
	h := newTestWebhook(t)
	b := newBlockingRefresh()
	h.refresh = b.refresh
	secret := map[string]string{"X-Fluxd-Secret": "s3cret"}
	ctx := context.Background()

	if rec := notify(t, h, pushOfApp, secret); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"repository":"reg:5000/app"`) {
		t.Fatalf("first notification: %d %s", rec.Code, rec.Body)
	}
	done := make(chan bool)
	go func() { done <- h.ProcessNext(ctx) }()
	if img := <-b.started; img != "reg:5000/app:2" {
		t.Fatalf("refreshing %q", img)
	}
	// The refresh is blocked: every notification is answered all the same.
	for i := range 50 {
		if rec := notify(t, h, pushOfApp, secret); rec.Code != http.StatusAccepted {
			t.Fatalf("notification %d while a refresh runs: %d %s", i, rec.Code, rec.Body)
		}
	}
	close(b.release)
	if !<-done {
		t.Fatal("the worker found nothing to do")
	}
	for h.ProcessNext(ctx) {
	}
	if n := b.refreshes(); n != 2 {
		t.Errorf("51 notifications of one repository, 50 during its refresh: %d refreshes, want 2", n)
	}
}

// Through a real HTTP server and Run's workers: the 202 comes while the
// refresh is blocked, and the refresh happens.
func TestWebhookServerAnswersWhileRefreshBlocks(t *testing.T) {
	h := newTestWebhook(t)
	b := newBlockingRefresh()
	h.refresh = b.refresh
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { h.Run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second}

	post := func() int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/notify", strings.NewReader(pushOfApp))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	select {
	case <-b.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh started")
	}
	// Blocked in the refresh: the next answer still comes.
	if code := post(); code != http.StatusAccepted {
		t.Fatalf("status %d while a refresh is blocked", code)
	}
	close(b.release)
	select {
	case <-b.started: // the one more refresh the second notification asked for
	case <-time.After(10 * time.Second):
		t.Fatal("the notification during the refresh was lost")
	}
}

// Senders name the repositories: the work they can queue is bounded. Past
// maxPending waiting repositories a notification is answered 503, and one
// notification yields at most maxPayloadRepositories refreshes.
func TestWebhookQueueIsBounded(t *testing.T) {
	h := newTestWebhook(t) // no worker runs: everything stays pending
	post := func(body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/notify?token=s3cret", strings.NewReader(body)))
		return rec.Code
	}
	var events []string
	for i := 0; i < maxPayloadRepositories+50; i++ {
		events = append(events, `{"action":"push","target":{"repository":"r`+strconv.Itoa(i)+`","tag":"1"},"request":{"host":"reg:5000"}}`)
	}
	if code := post(`{"events":[` + strings.Join(events, ",") + `]}`); code != http.StatusAccepted {
		t.Fatalf("a big notification: %d", code)
	}
	if n := len(h.pending); n != maxPayloadRepositories {
		t.Errorf("%d repositories queued from one notification; want %d", n, maxPayloadRepositories)
	}
	for i := len(h.pending); i < maxPending; i++ {
		if code := post(`{"events":[{"action":"push","target":{"repository":"x` + strconv.Itoa(i) + `","tag":"1"},"request":{"host":"reg:5000"}}]}`); code != http.StatusAccepted {
			t.Fatalf("notification %d: %d", i, code)
		}
	}
	if code := post(`{"events":[{"action":"push","target":{"repository":"one-too-many","tag":"1"},"request":{"host":"reg:5000"}}]}`); code != http.StatusServiceUnavailable {
		t.Errorf("past %d waiting repositories: %d; want 503", maxPending, code)
	}
	if code := post(pushOfApp); code != http.StatusServiceUnavailable {
		t.Errorf("a new repository on a full queue: %d; want 503", code)
	}
}
