package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

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

// FuzzWebhook sends any payload through the webhook: parsing must not
// panic, a parsed payload names at least one image and its sender, and
// every repository refreshed is a valid reference.
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
		images, source, err := parseNotification(body)
		if err == nil {
			if len(images) == 0 || (source != "dockerhub" && source != "distribution" && source != "harbor" && source != "quay") {
				t.Fatalf("parseNotification(%q) = %q from %q: no image, or an unknown sender", body, images, source)
			}
			for _, img := range images {
				if img == "" {
					t.Fatalf("parseNotification(%q) = %q: an empty image", body, images)
				}
			}
		}
		d := New(Config{}, watching(strictImages{t}, "reg:5000/app", "team/app", "harbor.example/proj/app", "quay.io/ns/app"), log)
		// Any tag may be notified, and the stub lists none: read once,
		// not for the seconds a notified tag is waited for.
		d.tagWait = wait.Backoff{}
		h, err := NewWebhookHandler(d, []byte("s3cret"), log)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/notify?token=s3cret", strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		for h.work(context.Background()) {
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
