package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"errors"
	"sync/atomic"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// notClonedGit is a remote whose first clone has not succeeded.
type notClonedGit struct{ err string }

func (g notClonedGit) Status() gitrepo.RemoteStatus {
	return gitrepo.RemoteStatus{NotCloned: true, Error: g.err}
}

// statusGit is a cloned remote whose status is given.
type statusGit gitrepo.RemoteStatus

func (g statusGit) Status() gitrepo.RemoteStatus { return gitrepo.RemoteStatus(g) }

// The health listener answers without a token, over real HTTP: /healthz
// 200 while fluxd serves, /readyz 503 with the reason while git is not
// cloned (still cloning, or refused) and 200 once ready; the API is not
// there, and only GET is.
func TestHealthHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		git        GitRemote
		wantStatus int
		wantBody   string
	}{
		{"cloning", notClonedGit{}, http.StatusServiceUnavailable, "not ready: git: cloning"},
		{"refused", notClonedGit{err: "cloning ssh://git@h/r: h refused fluxd's key SHA256:x; add this public key"}, http.StatusServiceUnavailable, "not cloned yet, retrying: cloning ssh://git@h/r: h refused fluxd's key"},
		{"cloned", &stubGit{}, http.StatusOK, "ok"},
		{"stuck past its timeout", statusGit{Waiting: "fetching", WaitingSince: time.Now().Add(-2 * time.Minute), WaitingFor: 30 * time.Second}, http.StatusServiceUnavailable, "fetching has waited on the remote for 2m0s, longer than its timeout of 30s"},
		{"one failed fetch", statusGit{Error: "fetching https://h/r: 503", ErrorSince: time.Now().Add(-time.Minute)}, http.StatusOK, "ok"},
		{"failing past the outage bound", statusGit{Error: "fetching https://h/r: 503", ErrorSince: time.Now().Add(-GitOutageNotReady - time.Minute)}, http.StatusServiceUnavailable, "not ready: git: failing for 6m0s: fetching https://h/r: 503"},
		{"fetching within its timeout", statusGit{Waiting: "fetching", WaitingSince: time.Now().Add(-20 * time.Second), WaitingFor: 30 * time.Second}, http.StatusOK, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(Config{}, Deps{Git: tc.git, Ready: func(context.Context) error { return nil }}, slog.New(slog.DiscardHandler))
			srv := httptest.NewServer(d.HealthHandlerWith(oneToken("fxd_good")))
			defer srv.Close()
			// With a token, the reason (a redacted URL, a key's
			// fingerprint: for fluxd's users).
			status, body := getWith(t, srv.URL+"/readyz", "Bearer fxd_good")
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("/readyz with a token: %d %q, want %d with %q", status, body, tc.wantStatus, tc.wantBody)
			}
			// Without one, or with a wrong one: ready or not, and the
			// failing component's name only.
			want := "ok\n"
			if tc.wantStatus != http.StatusOK {
				want = "not ready: git\n"
			}
			for _, authz := range []string{"", "Bearer fxd_wrong"} {
				if status, body := getWith(t, srv.URL+"/readyz", authz); status != tc.wantStatus || body != want {
					t.Errorf("/readyz with %q: %d %q, want %d %q", authz, status, body, tc.wantStatus, want)
				}
			}
			if status, body := get(t, srv.URL+"/healthz"); status != http.StatusOK || body != "ok\n" {
				t.Errorf("/healthz: %d %q, want 200 ok", status, body)
			}
			if status, _ := get(t, srv.URL+"/fluxd.v1.FluxService/ListServices"); status != http.StatusNotFound {
				t.Errorf("the API path on the health listener: %d, want 404", status)
			}
			resp, err := http.Post(srv.URL+"/readyz", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
			}
		})
	}
}

// oneToken accepts one token.
type oneToken string

func (o oneToken) Authenticate(tok string) (auth.Identity, error) {
	if tok == string(o) {
		return auth.Identity{Instance: "team-a", Role: auth.Viewer}, nil
	}
	return auth.Identity{}, auth.ErrUnknownToken
}

func getWith(t *testing.T, url, authz string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Health, over a real gRPC connection and without a token, says
// NOT_SERVING while a dependency is not ready (the readiness function
// fails, or git's last operation failed), and SERVING once all are.
func TestHealthReportsReadiness(t *testing.T) {
	var notReady atomic.Value
	notReady.Store("the cluster caches are not synced")
	git := &stubGit{}
	git.err.Store("")
	ready := func(context.Context) error {
		if s := notReady.Load().(string); s != "" {
			return errors.New(s)
		}
		return nil
	}
	f := newFixtureWith(t, Config{}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: git, Ready: ready})
	f.daemon.ready.ttl = -1 // every check reads the state anew (it is shared for a second in fluxd)
	h := healthpb.NewHealthClient(f.conn)
	check := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: fluxdv1.FluxService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return resp.GetStatus()
	}
	if got := check(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("before the caches sync: %v", got)
	}
	notReady.Store("")
	if got := check(); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("all ready: %v", got)
	}
	git.err.Store("fetching file:///x: connection refused")
	if got := check(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("git failing: %v", got)
	}
	git.err.Store("")
	notReady.Store("history database: database is locked")
	if got := check(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("database lost: %v", got)
	}
	// Watch sends the state now, then its changes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := w.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch: %v, %v", resp, err)
	}
}
