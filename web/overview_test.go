package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// countingFlux stands for fluxd's gRPC server in these narrow tests: it
// counts the plans asked for, each of which would fetch git on fluxd.
// (The JSON API against the real daemon is tested in e2e.)
type countingFlux struct {
	fluxdv1.UnimplementedFluxServiceServer
	plans, cached atomic.Int32
}

func (f *countingFlux) Release(ctx context.Context, req *fluxdv1.ReleaseRequest) (*fluxdv1.ReleaseResponse, error) {
	if req.GetSpec().GetCached() {
		f.cached.Add(1)
	}
	f.plans.Add(1)
	time.Sleep(100 * time.Millisecond) // a fetch takes a while
	return &fluxdv1.ReleaseResponse{Plan: &fluxdv1.Plan{Checksum: "sum"}}, nil
}

func newServerWith(t *testing.T, impl fluxdv1.FluxServiceServer) *httptest.Server {
	t.Helper()
	return newServerWithAuth(t, impl, testTokens)
}

// newServerWithAuth is newServerWith, the page checking tokens with a.
func newServerWithAuth(t *testing.T, impl fluxdv1.FluxServiceServer, a Authenticator) *httptest.Server {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	fluxdv1.RegisterFluxServiceServer(gs, impl)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, err := New(context.Background(), Config{Auth: a, Conn: conn, Hub: NewHub(16)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// However many pages refresh the services at once, fluxd computes the
// newest-allowed plan (a git fetch) once, and shares it for a while.
func TestConcurrentPageRefreshesShareOnePlan(t *testing.T) {
	t.Parallel()
	flux := &countingFlux{}
	srv := newServerWith(t, flux)
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/fluxd.v1.FluxService/Release", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer fxd_viewer")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	overviewBody := func(user string) string {
		return `{"spec":{"all":true,"allLatest":true,"user":"` + user + `"},"kind":"RELEASE_KIND_PLAN"}`
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := post(overviewBody("page")); code != http.StatusOK || !strings.Contains(body, `"sum"`) {
				t.Errorf("a page's refresh: %d %s", code, body)
			}
		}()
	}
	wg.Wait()
	if code, _ := post(overviewBody("another")); code != http.StatusOK {
		t.Errorf("a later refresh: %d", code)
	}
	if n := flux.plans.Load(); n != 1 {
		t.Errorf("21 page refreshes made fluxd plan (fetch git) %d times; want 1", n)
	}
	if n := flux.cached.Load(); n != 1 {
		t.Errorf("the overview was planned with a fetch (%d cached plans); want it planned against the clone as it is", n)
	}
	// Any other plan is the caller's own, computed each time.
	post(`{"spec":{"services":["default:deployment/web"],"allLatest":true},"kind":"RELEASE_KIND_PLAN"}`)
	if n := flux.plans.Load(); n != 2 || flux.cached.Load() != 1 {
		t.Errorf("a plan of one service was shared (%d plans); want it computed", n)
	}
	// Another instance gets its own.
	req, _ := http.NewRequest("POST", srv.URL+"/api/fluxd.v1.FluxService/Release", strings.NewReader(overviewBody("b")))
	req.Header.Set("Authorization", "Bearer fxd_other")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if n := flux.plans.Load(); n != 3 {
		t.Errorf("another instance's overview was served from the first one's (%d plans)", n)
	}
}

// scopedFlux plans as fluxd does for a scoped caller: it authenticates
// the call's token with the tokens file as it is now (the interceptors'
// check) and plans only the services in the caller's scope.
type scopedFlux struct {
	fluxdv1.UnimplementedFluxServiceServer
	tokens   *auth.Store
	services []string
}

func (f *scopedFlux) Release(ctx context.Context, req *fluxdv1.ReleaseRequest) (*fluxdv1.ReleaseResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	id, err := f.tokens.Authenticate(strings.TrimPrefix(strings.Join(md.Get("authorization"), ""), "Bearer "))
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	plan := &fluxdv1.Plan{Checksum: "sum"}
	for _, svc := range f.services {
		ns, _, _ := strings.Cut(svc, ":")
		if id.Scope.Contains(ns, ns+"/workload.yaml") {
			plan.Items = append(plan.Items, &fluxdv1.PlanItem{Service: svc, Action: "uptodate"})
		}
	}
	return &fluxdv1.ReleaseResponse{Plan: plan}, nil
}

// The services page's shared plan follows the tokens file: once an
// instance's scope is narrowed, its callers' next overview, well within
// the plan's overviewTTL, names none of the services the scope no longer
// holds.
func TestOverviewFollowsAScopeChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	tok, err := auth.Create(path, auth.Identity{Instance: "team", Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.AddScope(path, "team", &auth.Scope{Namespaces: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const mine, theirs = "a:deployment/web", "b:deployment/api"
	srv := newServerWithAuth(t, &scopedFlux{tokens: tokens, services: []string{mine, theirs}}, tokens)
	overview := func() string {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/api/fluxd.v1.FluxService/Release",
			strings.NewReader(`{"spec":{"all":true,"allLatest":true},"kind":"RELEASE_KIND_PLAN"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the overview: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	if got := overview(); !strings.Contains(got, mine) || !strings.Contains(got, theirs) {
		t.Fatalf("the overview in scope a,b: %s; want both services", got)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := strings.Replace(string(b), "namespaces=a,b", "namespaces=a", 1)
	if err := os.WriteFile(path, []byte(narrowed), 0o600); err != nil {
		t.Fatal(err)
	}
	got := overview()
	if strings.Contains(got, theirs) {
		t.Errorf("the overview after the scope was narrowed to a still names %s (the old scope's plan): %s", theirs, got)
	}
	if !strings.Contains(got, mine) {
		t.Errorf("the overview after the scope was narrowed to a lacks %s: %s", mine, got)
	}
}
