package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func sign(secret, ts, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	if ts != "" {
		mac.Write([]byte(ts + "."))
	}
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
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
