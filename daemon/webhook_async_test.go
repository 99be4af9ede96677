package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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

func newTestWebhook(t *testing.T) *WebhookHandler {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	h, err := NewWebhookHandler(New(Config{}, Deps{}, log), []byte("s3cret"), log)
	if err != nil {
		t.Fatal(err)
	}
	// These tests are about the queue: every repository counts as
	// watched (ssrf_test and webhook_test check the refusal).
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
	go func() { done <- h.work(ctx) }()
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
	for h.work(ctx) {
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

// countingBody records how much of a body the handler read.
type countingBody struct {
	remaining, read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	if c.remaining == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.remaining)
	for i := range n {
		p[i] = ' '
	}
	c.remaining -= n
	c.read += n
	return n, nil
}

func sign(secret, ts, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	if ts != "" {
		mac.Write([]byte(ts + "."))
	}
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// A request that is not authenticated by its headers has none of its body
// read (unless it is signed, when at most the limit is read); a body
// above 1 MiB is refused.
func TestWebhookReadsNoBodyBeforeAuthentication(t *testing.T) {
	h := newTestWebhook(t)
	now := time.Unix(1_700_000_000, 0)
	h.now = func() time.Time { return now }
	h.refresh = func(context.Context, string) error { return nil }
	stale := strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10)
	const big = 64 << 20
	for _, tc := range []struct {
		name    string
		target  string
		header  map[string]string
		want    int
		maxRead int
	}{
		{"no secret", "/v1/notify", nil, http.StatusUnauthorized, 0},
		{"wrong token", "/v1/notify?token=nope", nil, http.StatusUnauthorized, 0},
		{"wrong bearer", "/v1/notify", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized, 0},
		{"malformed signature", "/v1/notify", map[string]string{SignatureHeader: "sha256=00"}, http.StatusUnauthorized, 0},
		{"stale timestamp", "/v1/notify", map[string]string{SignatureHeader: sign("s3cret", stale, ""), TimestampHeader: stale}, http.StatusUnauthorized, 0},
		{"bad timestamp", "/v1/notify", map[string]string{SignatureHeader: sign("s3cret", "x", ""), TimestampHeader: "x"}, http.StatusUnauthorized, 0},
		{"secret, too big", "/v1/notify", map[string]string{"X-Fluxd-Secret": "s3cret"}, http.StatusRequestEntityTooLarge, maxPayload + 64<<10},
		{"signed, too big", "/v1/notify", map[string]string{SignatureHeader: sign("s3cret", "", "x")}, http.StatusRequestEntityTooLarge, maxPayload + 64<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{remaining: big}
			req := httptest.NewRequest(http.MethodPost, tc.target, body)
			req.ContentLength = -1 // as a chunked upload: the length is not known in advance
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if body.read > tc.maxRead {
				t.Errorf("read %d bytes of the body, want at most %d", body.read, tc.maxRead)
			}
		})
	}
}

// Signed with a timestamp: accepted within five minutes either way of
// fluxd's clock; refused outside, or when the timestamp was added to a
// request signed without one (a replay).
func TestWebhookSignedTimestamp(t *testing.T) {
	h := newTestWebhook(t)
	now := time.Unix(1_700_000_000, 0)
	h.now = func() time.Time { return now }
	h.refresh = func(context.Context, string) error { return nil }
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"now", map[string]string{TimestampHeader: at(0), SignatureHeader: sign("s3cret", at(0), pushOfApp)}, http.StatusAccepted},
		{"4m ago", map[string]string{TimestampHeader: at(-4 * time.Minute), SignatureHeader: sign("s3cret", at(-4*time.Minute), pushOfApp)}, http.StatusAccepted},
		{"4m ahead", map[string]string{TimestampHeader: at(4 * time.Minute), SignatureHeader: sign("s3cret", at(4*time.Minute), pushOfApp)}, http.StatusAccepted},
		{"6m ago", map[string]string{TimestampHeader: at(-6 * time.Minute), SignatureHeader: sign("s3cret", at(-6*time.Minute), pushOfApp)}, http.StatusUnauthorized},
		{"6m ahead", map[string]string{TimestampHeader: at(6 * time.Minute), SignatureHeader: sign("s3cret", at(6*time.Minute), pushOfApp)}, http.StatusUnauthorized},
		{"timestamp not signed", map[string]string{TimestampHeader: at(0), SignatureHeader: sign("s3cret", "", pushOfApp)}, http.StatusUnauthorized},
		{"other timestamp signed", map[string]string{TimestampHeader: at(0), SignatureHeader: sign("s3cret", at(-time.Hour), pushOfApp)}, http.StatusUnauthorized},
		{"wrong secret", map[string]string{TimestampHeader: at(0), SignatureHeader: sign("other", at(0), pushOfApp)}, http.StatusUnauthorized},
		{"no timestamp", map[string]string{SignatureHeader: sign("s3cret", "", pushOfApp)}, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rec := notify(t, h, pushOfApp, tc.header); rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
		})
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

// Signed bodies are read before the signature is checked, so only a few at
// once; and an operator may refuse signatures without a timestamp.
func TestSignedReadsAreBoundedAndTimestampsCanBeRequired(t *testing.T) {
	h := newTestWebhook(t)
	post := func(sig, ts string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(pushOfApp))
		req.Header.Set(SignatureHeader, sig)
		if ts != "" {
			req.Header.Set(TimestampHeader, ts)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	h.mu.Lock()
	h.signedReads = maxSignedReads // as many slow senders
	h.mu.Unlock()
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusServiceUnavailable {
		t.Errorf("a signed notification while %d are read: %d; want 503", maxSignedReads, code)
	}
	h.mu.Lock()
	h.signedReads = 0
	h.mu.Unlock()
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusAccepted {
		t.Errorf("a signed notification: %d; want 202", code)
	}
	h.RequireTimestamp = true
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusUnauthorized {
		t.Errorf("a signature without a timestamp when one is required: %d; want 401", code)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	if code := post(sign("s3cret", ts, pushOfApp), ts); code != http.StatusAccepted {
		t.Errorf("a signature with a timestamp: %d; want 202", code)
	}
}

// Senders that claim a signature but trickle their bodies cannot take
// every read slot from one address: a genuine sender from another
// address is still served.
func TestSignedReadsAreLimitedPerAddress(t *testing.T) {
	h := newTestWebhook(t)
	var held []*io.PipeWriter
	defer func() {
		for _, w := range held {
			_ = w.Close()
		}
	}()
	claimed := "sha256=" + strings.Repeat("00", 32)
	var wg sync.WaitGroup
	codes := make(chan int, 100)
	for i := range 40 {
		pr, pw := io.Pipe()
		held = append(held, pw)
		req := httptest.NewRequest(http.MethodPost, "/v1/notify", pr)
		req.RemoteAddr = "10.0.0.66:" + strconv.Itoa(40000+i)
		req.Header.Set(SignatureHeader, claimed)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			codes <- rec.Code
		}()
	}
	// All but maxSignedReadsPerAddr are refused at once, with 429.
	for range 40 - maxSignedReadsPerAddr {
		if c := <-codes; c != http.StatusTooManyRequests {
			t.Fatalf("a slow signed sender beyond its address's share: %d, want 429", c)
		}
	}
	body := pushOfApp
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(body))
	req.RemoteAddr = "192.0.2.10:5555"
	req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("a genuine signed sender while another address trickles: %d %s", rec.Code, rec.Body)
	}
	for _, w := range held {
		_ = w.CloseWithError(errors.New("gone"))
	}
	wg.Wait()
}
