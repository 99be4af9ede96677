package web

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// promotionServer stands in for fluxd's gRPC server behind the page: it
// records each call's method and bearer token. Roles are the real
// server's to check (daemon's interceptors, tested in daemon and on the
// stack by e2e TestPipelinesPageInBrowser); it refuses the viewer's
// actions as that server does, so that the test sees the page pass the
// refusal on.
type promotionServer struct {
	fluxdv1.UnimplementedFluxServiceServer
	mu    sync.Mutex
	calls []string // "Method token"
}

func (s *promotionServer) called(ctx context.Context, method string, deployerOnly bool) error {
	md, _ := metadata.FromIncomingContext(ctx)
	tok := strings.TrimPrefix(strings.Join(md.Get("authorization"), ","), "Bearer ")
	s.mu.Lock()
	s.calls = append(s.calls, method+" "+tok)
	s.mu.Unlock()
	if deployerOnly && !testTokens[tok].Allows(auth.Deployer) {
		return status.Error(codes.PermissionDenied, method+" needs the deployer role")
	}
	return nil
}

func (s *promotionServer) ListPipelines(ctx context.Context, _ *fluxdv1.ListPipelinesRequest) (*fluxdv1.ListPipelinesResponse, error) {
	return &fluxdv1.ListPipelinesResponse{Pipelines: []*fluxdv1.Pipeline{{Name: "web", Namespace: "team", Stages: []string{"dev"}}}}, s.called(ctx, "ListPipelines", false)
}

func (s *promotionServer) ListStages(ctx context.Context, _ *fluxdv1.ListStagesRequest) (*fluxdv1.ListStagesResponse, error) {
	return &fluxdv1.ListStagesResponse{Pipeline: "team/web"}, s.called(ctx, "ListStages", false)
}

func (s *promotionServer) ListBundles(ctx context.Context, _ *fluxdv1.ListBundlesRequest) (*fluxdv1.ListBundlesResponse, error) {
	return &fluxdv1.ListBundlesResponse{Pipeline: "team/web"}, s.called(ctx, "ListBundles", false)
}

func (s *promotionServer) Promote(ctx context.Context, r *fluxdv1.PromoteRequest) (*fluxdv1.PromoteResponse, error) {
	if err := s.called(ctx, "Promote", r.GetKind() != fluxdv1.ReleaseKind_RELEASE_KIND_PLAN); err != nil {
		return nil, err
	}
	return &fluxdv1.PromoteResponse{Plan: &fluxdv1.Plan{Checksum: "sum"}}, nil
}

func (s *promotionServer) Approve(ctx context.Context, _ *fluxdv1.ApproveRequest) (*fluxdv1.ApproveResponse, error) {
	if err := s.called(ctx, "Approve", true); err != nil {
		return nil, err
	}
	return &fluxdv1.ApproveResponse{Approvals: 1}, nil
}

func (s *promotionServer) ResumeStage(ctx context.Context, _ *fluxdv1.ResumeStageRequest) (*fluxdv1.ResumeStageResponse, error) {
	if err := s.called(ctx, "ResumeStage", true); err != nil {
		return nil, err
	}
	return &fluxdv1.ResumeStageResponse{}, nil
}

// The pipelines view's calls are the page's: a session (cookie and CSRF
// token) may make them, each reaches the server with the session's own
// token (so the server judges the session's role and scope), and a
// refusal of a viewer's approval, promotion or resume comes back as 403
// with the server's reason, which the page shows.
func TestSessionCallsThePromotionMethods(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ps := &promotionServer{}
	fluxdv1.RegisterFluxServiceServer(gs, ps)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, err := New(context.Background(), Config{Auth: testTokens, Conn: conn, Hub: NewHub(4)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	session := func(token string) (cookie, csrf string) {
		t.Helper()
		code, key := signIn(t, srv, token, "application/json", "")
		if code != http.StatusOK {
			t.Fatalf("sign-in as %s: %d", token, code)
		}
		req, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
		req.Header.Set("Cookie", sessionCookie+"="+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var si sessionInfo
		if err := json.NewDecoder(resp.Body).Decode(&si); err != nil {
			t.Fatal(err)
		}
		return sessionCookie + "=" + key, si.CSRF
	}
	call := func(cookie, csrf, method, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/api/fluxd.v1.FluxService/"+method, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", cookie)
		req.Header.Set(csrfHeader, csrf)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	viewer, viewerCSRF := session("fxd_viewer")
	deployer, deployerCSRF := session("fxd_deployer")
	const plan, execute = `{"stage":"prod","kind":"RELEASE_KIND_PLAN"}`, `{"stage":"prod","kind":"RELEASE_KIND_EXECUTE","checksum":"sum"}`
	for _, c := range []struct {
		who, cookie, csrf, method, body string
		want                            int
	}{
		// What a viewer's page reads, and a promotion's plan.
		{"fxd_viewer", viewer, viewerCSRF, "ListPipelines", `{}`, http.StatusOK},
		{"fxd_viewer", viewer, viewerCSRF, "ListStages", `{"pipeline":"team/web"}`, http.StatusOK},
		{"fxd_viewer", viewer, viewerCSRF, "ListBundles", `{"pipeline":"team/web"}`, http.StatusOK},
		{"fxd_viewer", viewer, viewerCSRF, "Promote", plan, http.StatusOK},
		// A viewer's actions reach the server as the viewer, which
		// refuses them.
		{"fxd_viewer", viewer, viewerCSRF, "Promote", execute, http.StatusForbidden},
		{"fxd_viewer", viewer, viewerCSRF, "Approve", `{"stage":"prod"}`, http.StatusForbidden},
		{"fxd_viewer", viewer, viewerCSRF, "ResumeStage", `{"stage":"prod"}`, http.StatusForbidden},
		// A deployer's.
		{"fxd_deployer", deployer, deployerCSRF, "Promote", execute, http.StatusOK},
		{"fxd_deployer", deployer, deployerCSRF, "Approve", `{"stage":"prod"}`, http.StatusOK},
		{"fxd_deployer", deployer, deployerCSRF, "ResumeStage", `{"stage":"prod"}`, http.StatusOK},
	} {
		ps.mu.Lock()
		ps.calls = nil
		ps.mu.Unlock()
		code, body := call(c.cookie, c.csrf, c.method, c.body)
		if code != c.want {
			t.Errorf("%s's session calls %s %s: %d %s, want %d", c.who, c.method, c.body, code, body, c.want)
		}
		if code == http.StatusForbidden && !strings.Contains(body, "needs the deployer role") {
			t.Errorf("%s's %s was refused with %s, not by the server's role check", c.who, c.method, body)
		}
		ps.mu.Lock()
		calls := strings.Join(ps.calls, "; ")
		ps.mu.Unlock()
		if want := c.method + " " + c.who; calls != want {
			t.Errorf("%s's session calls %s: the server got %q, want %q", c.who, c.method, calls, want)
		}
	}
	// Without the page's CSRF token, no action reaches the server.
	ps.mu.Lock()
	ps.calls = nil
	ps.mu.Unlock()
	code, _ := call(deployer, "", "Approve", `{"stage":"prod"}`)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if code != http.StatusForbidden || len(ps.calls) != 0 {
		t.Errorf("Approve without the CSRF token: %d, server calls %v", code, ps.calls)
	}
}
