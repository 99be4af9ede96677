package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The distribution registry notifies pulls as well as pushes, and sends
// an envelope again until it is answered 2xx, holding every later event
// of the endpoint's queue behind it. An envelope without a push event is
// answered 200 and refreshes nothing; a malformed one is still a 400.
func TestWebhookAnswersDistributionPullsWith200(t *testing.T) {
	imgs := &countingImages{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := NewWebhookHandler(New(Config{}, watching(imgs, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log), []byte("s3cret"), log)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"manifest pull", `{"events":[{"action":"pull","target":{"repository":"app","tag":"1"},"request":{"host":"reg:5000"}}]}`, http.StatusOK},
		{"blob pull", `{"events":[{"action":"pull","target":{"repository":"app"},"request":{"host":"reg:5000"}}]}`, http.StatusOK},
		{"delete", `{"events":[{"action":"delete","target":{"repository":"app"},"request":{"host":"reg:5000"}}]}`, http.StatusOK},
		{"not json", `{"events":[`, http.StatusBadRequest},
		{"no sender known", `{}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer s3cret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			for h.work(context.Background()) {
			}
			if len(imgs.repos) != 0 {
				t.Errorf("refreshed %v", imgs.repos)
			}
		})
	}
}
