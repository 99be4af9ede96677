package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/webhook"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/util/workqueue"
)

// No caller reaches a host fluxd does not watch: every way a caller can
// name a repository (a plan's image, a notification, each registry's
// webhook payload) is refused before any request when no watched
// service runs the repository, whatever the host (an internal service,
// a cloud metadata address). The internal service counts the requests:
// none may arrive. (The reproduction of [security-2] 1 is the first
// row: a viewer's release --all --update-image --dry-run.)
func TestNoCallerReachesAnUnwatchedHost(t *testing.T) {
	internal, requests := internalServer(t)
	f, _, d := realReleaser(t, "registry.invalid/team/app:1.0")
	viewer, deployer := withToken(f.tokens[auth.Viewer]), withToken(f.tokens[auth.Deployer])
	wh, err := webhook.New(d, workqueue.NewTyped[string](), []byte("s3cret"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	plan := func(spec *fluxdv1.ReleaseSpec) error {
		_, err := f.client.Release(viewer, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: spec})
		return err
	}
	webhook := func(body string) error {
		req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(body))
		req.Header.Set("X-Fluxd-Secret", "s3cret")
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, req)
		for wh.ProcessNext(context.Background()) {
		}
		if rec.Code != http.StatusBadRequest {
			return fmt.Errorf("webhook answered %d: %s", rec.Code, rec.Body)
		}
		return status.Error(codes.InvalidArgument, rec.Body.String())
	}
	for _, host := range []string{internal, "169.254.169.254", "localhost:1"} {
		repo := host + "/internal/x"
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"viewer: release --all --update-image --dry-run", func() error { return plan(&fluxdv1.ReleaseSpec{All: true, Image: repo + ":1"}) }},
			{"viewer: release SERVICE --update-image --dry-run", func() error {
				return plan(&fluxdv1.ReleaseSpec{Services: []string{"app0"}, Image: repo + ":1"})
			}},
			{"viewer: release --all --exclude --update-image --dry-run", func() error {
				return plan(&fluxdv1.ReleaseSpec{All: true, Exclude: []string{"app0"}, Image: repo + ":1"})
			}},
			{"deployer: notify", func() error {
				_, err := f.client.NotifyImage(deployer, &fluxdv1.NotifyImageRequest{Image: repo + ":1"})
				return err
			}},
			{"webhook: distribution request.host", func() error {
				return webhook(fmt.Sprintf(`{"events":[{"action":"push","target":{"repository":"internal/x","tag":"1"},"request":{"host":%q}}]}`, host))
			}},
			{"webhook: Harbor resource_url", func() error {
				return webhook(fmt.Sprintf(`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"resource_url":%q}]}}`, repo+":1"))
			}},
			{"webhook: Quay docker_url", func() error { return webhook(fmt.Sprintf(`{"docker_url":%q}`, repo)) }},
			{"webhook: Docker Hub repo_name", func() error {
				return webhook(fmt.Sprintf(`{"push_data":{"tag":"1"},"repository":{"repo_name":%q}}`, repo))
			}},
		} {
			t.Run(host+"/"+c.name, func(t *testing.T) {
				err := c.call()
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no service runs an image of "+repo) {
					t.Fatalf("want a refusal saying no service runs %s, got %v", repo, err)
				}
				if strings.Contains(err.Error(), "admin_password") {
					t.Fatalf("the internal service's body reached the caller: %v", err)
				}
				if n := requests.Load(); n != 0 {
					t.Fatalf("fluxd sent %d requests to the internal service", n)
				}
			})
		}
	}
}
