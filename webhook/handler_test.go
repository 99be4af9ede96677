package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

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
