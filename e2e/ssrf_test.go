package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// [security-2] 1, as reproduced: a viewer asks for a dry run of an image
// on an internal HTTP service that answers 418 with a secret. fluxd
// refuses before any request (no service runs that repository), the
// secret never reaches the viewer, and fluxctl says what failed instead
// of blaming its own connection. A deployer's notify is refused alike.
func TestViewerCannotMakeFluxdFetchAnyURL(t *testing.T) {
	f := sharedFluxd(t)
	var requests atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "INTERNAL-ONLY admin_password=hunter2")
	}))
	defer internal.Close()
	host := strings.TrimPrefix(internal.URL, "http://")
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=mallory"}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"viewer: release --all --update-image --dry-run", viewer, []string{"release", "--all", "--update-image", host + "/internal/x:1", "--dry-run"}},
		{"deployer: notify", deployer, []string{"notify", host + "/internal/x:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := fluxctl(t, tc.env, tc.args...)
			all := out + stderr
			if code == 0 || !strings.Contains(all, "no service runs an image of "+host+"/internal/x") {
				t.Fatalf("exit %d, want a refusal naming the repository:\n%s", code, all)
			}
			for _, never := range []string{"admin_password", "INTERNAL-ONLY", "speaks plaintext", "cannot reach fluxd"} {
				if strings.Contains(all, never) {
					t.Errorf("the output says %q:\n%s", never, all)
				}
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("fluxd sent %d requests to the internal service", n)
			}
		})
	}
}
