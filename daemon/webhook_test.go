package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/webhook"
)

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
	h, err := webhook.New(New(Config{}, watching(imgs, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log), workqueue.NewTyped[string](), []byte("s3cret"), log)
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
			for h.ProcessNext(context.Background()) {
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

// The distribution registry notifies pulls as well as pushes, and sends
// an envelope again until it is answered 2xx, holding every later event
// of the endpoint's queue behind it. An envelope without a push event is
// answered 200 and refreshes nothing; a malformed one is still a 400.
func TestWebhookAnswersDistributionPullsWith200(t *testing.T) {
	imgs := &countingImages{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := webhook.New(New(Config{}, watching(imgs, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log), workqueue.NewTyped[string](), []byte("s3cret"), log)
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
			for h.ProcessNext(context.Background()) {
			}
			if len(imgs.repos) != 0 {
				t.Errorf("refreshed %v", imgs.repos)
			}
		})
	}
}

// strictImages fails the test when asked for a repository that does not
// parse: nothing a payload says may reach the registry unchecked.
type strictImages struct{ t *testing.T }

func (s strictImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	if _, err := name.NewRepository(repo, name.WeakValidation); err != nil {
		s.t.Errorf("a notification made fluxd read the repository %q, which does not parse: %v", repo, err)
	}
	// Whatever host a payload names (request.host, resource_url,
	// docker_url, repo_name), fluxd reads only repositories its services
	// run.
	if !registry.RunsRepository(fuzzWatched, repo) {
		s.t.Errorf("a notification made fluxd read the repository %q, which no watched service runs", repo)
	}
	return nil, nil
}

// fuzzWatched are the images the fuzzed daemon's services run.
var fuzzWatched = []string{"reg:5000/app:1", "team/app:1", "harbor.example/proj/app:1", "quay.io/ns/app:1"}

// watching is Deps whose cluster runs a workload of each repository,
// reading images through imgs.
func watching(imgs ImageLister, repos ...string) Deps {
	c := &stubCluster{}
	for i, r := range repos {
		c.workloads = append(c.workloads, platform.Workload{ID: platform.ID{Namespace: "default", Kind: "deployment", Name: "w" + strconv.Itoa(i)},
			Containers: []platform.Container{{Name: "c", Image: r + ":1"}}})
	}
	return Deps{Cluster: c, Releaser: stubReleaser{}, Images: imgs}
}

// FuzzWebhook sends any payload through the webhook to a real daemon:
// every repository refreshed is a valid reference that a watched service
// runs. (The webhook package's FuzzParseNotification checks the parse.)
func FuzzWebhook(f *testing.F) {
	for _, s := range []string{
		`{"push_data":{"tag":"1.2"},"repository":{"repo_name":"team/app"}}`,
		`{"push_data":{},"repository":{"repo_name":"team/app"}}`,
		`{"push_data":{"tag":"1.2"},"repository":"team/app"}`,
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000"}},{"action":"pull","target":{"repository":"app"},"request":{"host":"reg:5000"}}]}`,
		`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"harbor.example/proj/app:3"},{"resource_url":""}]}}`,
		`{"type":"DELETE_ARTIFACT","event_data":{"resources":[]}}`,
		`{"repository":"ns/app","docker_url":"quay.io/ns/app","updated_tags":["4","5"]}`,
		`{"docker_url":"quay.io/ns/app:1.0\nimage: evil"}`,
		`{"push_data":{"tag":"a\"b"},"repository":{"repo_name":"Team/App"}}`,
		`{}`, `[]`, `null`, `not json`,
		// Host fields naming other hosts: an internal service, a
		// metadata address, a watched path on another host, userinfo.
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"127.0.0.1:8080"}}]}`,
		`{"events":[{"action":"push","target":{"repository":"latest/meta-data","tag":"1"},"request":{"host":"169.254.169.254"}}]}`,
		`{"events":[{"action":"push","target":{"repository":"app","tag":"2"},"request":{"host":"reg:5000@evil.example"}}]}`,
		`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":"10.0.0.1:5000/proj/app:3"}]}}`,
		`{"docker_url":"localhost:2375/ns/app"}`,
		`{"push_data":{"tag":"1"},"repository":{"repo_name":"evil.example/team/app"}}`,
	} {
		f.Add([]byte(s))
	}
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, body []byte) {
		d := New(Config{}, watching(strictImages{t}, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log)
		// Any tag may be notified, and the stub lists none: read once,
		// not for the seconds a notified tag is waited for.
		d.tagWait = wait.Backoff{}
		h, err := webhook.New(d, workqueue.NewTyped[string](), []byte("s3cret"), log)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/notify?token=s3cret", strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		for h.ProcessNext(context.Background()) {
		}
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusBadGateway,
			http.StatusOK: // a distribution batch with no push (pull events): ignored, so the registry's queue moves on
		default:
			t.Errorf("payload %q: status %d", body, rec.Code)
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	})
}
