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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/registry"
)

func TestParseNotification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, source string
		want               []string
	}{
		{"dockerhub", `{"push_data":{"tag":"1.2"},"repository":{"repo_name":"team/app"}}`, "dockerhub", []string{"team/app:1.2"}},
		{"distribution", `{"events":[{"action":"pull","target":{"repository":"app","tag":"1"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}}]}`, "distribution", []string{"reg:5000/app:2"}},
		// A push sends an event per blob (no tag) and one per manifest:
		// only the manifest's costs a refresh.
		{"distribution blobs and a manifest", `{"events":[{"action":"push","target":{"mediaType":"application/octet-stream","repository":"app","digest":"sha256:aa"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"mediaType":"application/vnd.docker.container.image.v1+json","repository":"app","digest":"sha256:bb"},"request":{"host":"reg:5000"}},
			{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"app","tag":"3"},"request":{"host":"reg:5000"}}]}`, "distribution", []string{"reg:5000/app:3"}},
		{"harbor", `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"harbor.example/proj/app:3"}]}}`, "harbor", []string{"harbor.example/proj/app:3"}},
		{"quay", `{"repository":"ns/app","docker_url":"quay.io/ns/app","updated_tags":["4","5"]}`, "quay", []string{"quay.io/ns/app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source, err := parseNotification([]byte(tc.body))
			if err != nil || source != tc.source {
				t.Fatalf("parse: %v, %q", err, source)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	blobs := `{"events":[{"action":"push","target":{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","repository":"app","digest":"sha256:aa"},"request":{"host":"reg:5000"}},
		{"action":"push","target":{"mediaType":"application/octet-stream","repository":"app","digest":"sha256:bb"},"request":{"host":"reg:5000"}}]}`
	if got, _, err := parseNotification([]byte(blobs)); !errors.Is(err, errNoPushEvents) {
		t.Errorf("an envelope of blob pushes = %v, %v; want nothing to refresh", got, err)
	}
	for _, bad := range []string{`not json`, `{}`, `{"type":"DELETE_ARTIFACT","event_data":{}}`, `{"events":[{"action":"pull"}]}`} {
		if _, _, err := parseNotification([]byte(bad)); err == nil {
			t.Errorf("parse(%s) succeeded", bad)
		}
	}
}

// countingImages counts refreshes. Its repositories hold the tags the
// tests notify (a notified tag missing from the list is read again).
type countingImages struct{ repos []string }

func (c *countingImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	c.repos = append(c.repos, repo)
	return []registry.Image{{Repository: repo, Tag: "1"}, {Repository: repo, Tag: "2"}, {Repository: repo, Tag: "v1"}, {Repository: repo, Tag: "latest"}}, nil
}

func TestWebhookAuthenticatesAndRefreshes(t *testing.T) {
	imgs := &countingImages{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := NewWebhookHandler(New(Config{}, watching(imgs, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log), []byte("s3cret"), log)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}}]}`
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	for _, tc := range []struct {
		name   string
		target string
		header map[string]string
		want   int
	}{
		{"no secret", "/v1/notify", nil, http.StatusUnauthorized},
		{"wrong secret", "/v1/notify?token=nope", nil, http.StatusUnauthorized},
		{"bad signature", "/v1/notify", map[string]string{"X-Hub-Signature-256": "sha256=00"}, http.StatusUnauthorized},
		{"query token", "/v1/notify?token=s3cret", nil, http.StatusAccepted},
		{"bearer", "/v1/notify", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusAccepted},
		{"header", "/v1/notify", map[string]string{"X-Fluxd-Secret": "s3cret"}, http.StatusAccepted},
		{"hmac", "/v1/notify", map[string]string{"X-Hub-Signature-256": sig}, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(imgs.repos)
			req := httptest.NewRequest(http.MethodPost, tc.target, strings.NewReader(body))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			for h.work(context.Background()) {
			}
			refreshed := len(imgs.repos) - before
			if (tc.want == http.StatusAccepted) != (refreshed == 1) {
				t.Errorf("refreshed %d repositories", refreshed)
			}
			if tc.want == http.StatusAccepted && !strings.Contains(rec.Body.String(), `"repository":"reg:5000/app"`) {
				t.Errorf("body: %s", rec.Body)
			}
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/notify?token=s3cret", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}
