package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"net"
	"sync"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type tokens map[string]auth.Identity

func (t tokens) Authenticate(tok string) (auth.Identity, error) {
	if id, ok := t[tok]; ok {
		return id, nil
	}
	return auth.Identity{}, auth.ErrUnknownToken
}

var testTokens = tokens{
	"fxd_viewer":   {Instance: "a", Role: auth.Viewer},
	"fxd_deployer": {Instance: "a", Role: auth.Deployer},
	"fxd_other":    {Instance: "b", Role: auth.Viewer},
	"fxd_scoped":   {Instance: "c", Role: auth.Viewer, Scope: &auth.Scope{Namespaces: []string{"c"}}},
}

func newTestServer(t *testing.T) (*httptest.Server, *Hub) {
	t.Helper()
	// The JSON API's calls are tested on the real stack (e2e); these
	// tests need only a connection that is never used.
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hub := NewHub(4)
	h, err := New(context.Background(), Config{Auth: testTokens, Conn: conn, Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, hub
}

// readEvents reads SSE events until n "event:" lines of the wanted types
// were read or the stream ends.
func readEvents(t *testing.T, resp *http.Response, n int) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	var id string
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			out = append(out, v+" "+id)
		}
	}
	return out
}

func openEvents(t *testing.T, srv *httptest.Server, token, last string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return resp
}

// Sign-in keeps the token on the server: the cookie is a random key,
// HttpOnly and SameSite=Strict; a call with the cookie needs the CSRF
// token and the page's origin; sign-out ends the session.
func TestSessionCookieAndCSRF(t *testing.T) {
	srv, _ := newTestServer(t)
	post := func(path, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post("/api/session", `{"token":"fxd_nope"}`, nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign-in with an unknown token: %s", r.Status)
	}
	if r := post("/api/session", `{"token":"fxd_viewer"}`, map[string]string{"Origin": "https://evil.example"}); r.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in from another origin: %s", r.Status)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/api/session", strings.NewReader(`{"token":"fxd_deployer","name":"Ann"}`))
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var si sessionInfo
	_ = json.NewDecoder(resp.Body).Decode(&si)
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || strings.Contains(ck.Value, "fxd_deployer") {
		t.Fatalf("session cookie %+v", ck)
	}
	if si.Instance != "a" || si.Role != "deployer" || !si.CanAct || si.Name != "Ann" || si.CSRF == "" {
		t.Errorf("session info %+v", si)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	cookie := map[string]string{"Cookie": sessionCookie + "=" + ck.Value}
	if r := post("/api/fluxd.v1.FluxService/Lock", `{}`, cookie); r.StatusCode != http.StatusForbidden {
		t.Errorf("a cookie call without the CSRF token: %s, want 403", r.Status)
	}
	// A session calls only what the page uses; WatchJob streams and is
	// refused to everyone, with what to use instead.
	withCSRF := map[string]string{"Cookie": cookie["Cookie"], csrfHeader: si.CSRF}
	for _, m := range []string{"NotifyImage", "Identity", "Version"} {
		if r := post("/api/fluxd.v1.FluxService/"+m, `{}`, withCSRF); r.StatusCode != http.StatusForbidden {
			t.Errorf("a cookie call of %s: %s, want 403", m, r.Status)
		}
	}
	if r := post("/api/fluxd.v1.FluxService/WatchJob", `{}`, map[string]string{"Authorization": "Bearer fxd_deployer"}); r.StatusCode != http.StatusNotImplemented {
		t.Errorf("WatchJob over the JSON API: %s, want 501", r.Status)
	}
	withBadOrigin := map[string]string{"Cookie": cookie["Cookie"], csrfHeader: si.CSRF, "Origin": "https://evil.example"}
	if r := post("/api/fluxd.v1.FluxService/Lock", `{}`, withBadOrigin); r.StatusCode != http.StatusForbidden {
		t.Errorf("a cookie call from another origin: %s, want 403", r.Status)
	}
	del, _ := http.NewRequest("DELETE", srv.URL+"/api/session", nil)
	del.Header.Set("Cookie", cookie["Cookie"])
	del.Header.Set(csrfHeader, si.CSRF)
	if r, err := http.DefaultClient.Do(del); err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out: %v %v", r, err)
	}
	who, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
	who.Header.Set("Cookie", cookie["Cookie"])
	if r, err := http.DefaultClient.Do(who); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session after sign-out: %v %v, want 401", r, err)
	}
}

// The page and its assets are embedded: served with no other origin.
func TestPageIsEmbedded(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, p := range []string{"/", "/static/app.js", "/static/style.css"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
}

// The page's script is ES modules: index.html loads app.js as a module,
// every module is served as text/javascript (a browser runs no module of
// another type), and every relative import names an embedded file.
func TestPageScriptsAreModules(t *testing.T) {
	srv, _ := newTestServer(t)
	get := func(p string) (string, *http.Response) {
		t.Helper()
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), resp
	}
	if page, _ := get("/"); !strings.Contains(page, `<script type="module" src="/static/app.js"></script>`) {
		t.Errorf("index.html does not load /static/app.js as a module:\n%s", page)
	}
	importRe := regexp.MustCompile(`(?m)^import .* from '(\.{1,2}/[^']+)';$`)
	modules := 0
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		modules++
		body, resp := get("/" + p)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
			t.Errorf("GET /%s: %s, Content-Type %q; want 200, text/javascript", p, resp.Status, resp.Header.Get("Content-Type"))
		}
		for _, m := range importRe.FindAllStringSubmatch(body, -1) {
			if _, err := fs.Stat(static, path.Join(path.Dir(p), m[1])); err != nil {
				t.Errorf("%s imports %s, which is not embedded: %v", p, m[1], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if modules < 2 {
		t.Errorf("%d modules under static/; want app.js and the modules it imports", modules)
	}
}

// signIn signs in with token from the test's address, presenting cookie
// (when not ""), and returns the status and the new session's key.
func signIn(t *testing.T, srv *httptest.Server, token, contentType, cookie string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/api/session", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", contentType)
	if cookie != "" {
		req.Header.Set("Cookie", sessionCookie+"="+cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return resp.StatusCode, c.Value
		}
	}
	return resp.StatusCode, ""
}

// Failed sign-ins are limited per address and successful ones are not;
// a token's sessions are capped (the oldest ends); a new sign-in ends the
// session the browser presents; the form must be JSON.
func TestSignInLimitsFailuresAndSessions(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	if code, _ := signIn(t, srv, "fxd_viewer", "text/plain", ""); code != http.StatusUnsupportedMediaType {
		t.Errorf("a sign-in as text/plain: %d, want 415", code)
	}
	// Successful sign-ins beyond the old shared burst (20) all work.
	var keys []string
	for i := 0; i < 40; i++ {
		code, key := signIn(t, srv, "fxd_viewer", "application/json", "")
		if code != http.StatusOK {
			t.Fatalf("successful sign-in %d: %d", i, code)
		}
		keys = append(keys, key)
	}
	h := srv.Config.Handler.(*Handler)
	n := 0
	for _, se := range h.sessions.m {
		if se.token == "fxd_viewer" {
			n++
		}
	}
	if n != maxSessionsPerToken {
		t.Errorf("the token has %d sessions after 40 sign-ins; want the cap, %d", n, maxSessionsPerToken)
	}
	if h.sessions.get(keys[0], time.Now()) != nil || h.sessions.get(keys[39], time.Now()) == nil {
		t.Error("beyond the cap, the token's oldest session should end and the newest live")
	}
	// A new sign-in ends the session presented.
	_, renewed := signIn(t, srv, "fxd_deployer", "application/json", keys[39])
	if h.sessions.get(keys[39], time.Now()) != nil || renewed == "" {
		t.Error("the session presented at a new sign-in is still live")
	}
	// Failures: after the burst, wrong tokens are answered 429; a token
	// that authenticates is never refused for them (behind an Ingress,
	// everyone shares the address that failed).
	for i := 0; i < 10; i++ {
		if code, _ := signIn(t, srv, "fxd_wrong", "application/json", ""); code != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: %d, want 401", i, code)
		}
	}
	for i := 0; i < 2; i++ {
		if code, _ := signIn(t, srv, "fxd_wrong", "application/json", ""); code != http.StatusTooManyRequests {
			t.Errorf("failed sign-in %d after 10 failures from one address: %d, want 429", 11+i, code)
		}
	}
	if code, _ := signIn(t, srv, "fxd_viewer", "application/json", ""); code != http.StatusOK {
		t.Errorf("a good token after 12 failures from its address: %d, want 200", code)
	}
	// Another address is not locked out.
	if l := h.signIns.Get("192.0.2.1"); l.Tokens() < 1 {
		t.Error("another address shares the failures' limit")
	}
}

// On a follower replica the page is told that live events do not tell of
// jobs, so that it polls.
func TestSessionSaysWhetherEventsAreLive(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	h := srv.Config.Handler.(*Handler)
	leads := false
	h.cfg.Live = func() bool { return leads }
	who := func() sessionInfo {
		req, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
		req.Header.Set("Authorization", "Bearer fxd_viewer")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var si sessionInfo
		_ = json.NewDecoder(resp.Body).Decode(&si)
		return si
	}
	if who().LiveEvents {
		t.Error("a follower says its events are live")
	}
	leads = true
	if !who().LiveEvents {
		t.Error("the leader says its events are not live")
	}
}

// Behind a TLS-terminating proxy (SecureCookie), the session cookie is
// Secure and __Host- prefixed, and HSTS is sent; without, neither.
func TestSecureCookieBehindAProxy(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	h := srv.Config.Handler.(*Handler)
	signInCookie := func() (*http.Cookie, *http.Response) {
		req, _ := http.NewRequest("POST", srv.URL+"/api/session", strings.NewReader(`{"token":"fxd_viewer"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			return c, resp
		}
		return nil, resp
	}
	ck, resp := signInCookie()
	if ck == nil || ck.Name != sessionCookie || ck.Secure || resp.Header.Get("Strict-Transport-Security") != "" {
		t.Errorf("over plain HTTP: cookie %+v, HSTS %q", ck, resp.Header.Get("Strict-Transport-Security"))
	}
	h.cfg.SecureCookie = true
	ck, resp = signInCookie()
	if ck == nil || ck.Name != "__Host-fluxd_session" || !ck.Secure || ck.Path != "/" || ck.Domain != "" || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("behind a TLS proxy: cookie %+v, HSTS %q", ck, resp.Header.Get("Strict-Transport-Security"))
	}
	who, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
	who.Header.Set("Cookie", ck.Name+"="+ck.Value)
	if r, err := http.DefaultClient.Do(who); err != nil || r.StatusCode != http.StatusOK {
		t.Errorf("the __Host- cookie does not sign in: %v %v", r, err)
	}
}

// A notification meant for the callers whose scope holds a service using
// its repository reaches those, and not a scoped caller whose scope holds
// none (which would learn of another team's repository).
func TestNotificationsReachOnlyTheirAudience(t *testing.T) {
	srv, hub := newTestServer(t)
	scoped := openEvents(t, srv, "fxd_scoped", "")
	unscoped := openEvents(t, srv, "fxd_other", "")
	readEvents(t, scoped, 1)
	readEvents(t, unscoped, 1)
	inNamespace := func(ns string) func(auth.Identity) bool {
		return func(id auth.Identity) bool { return id.Scope.Contains(ns, "") }
	}
	hub.PublishTo(inNamespace("b"), "notify", &fluxdv1.ImageNotification{Repository: "reg/b-app"})
	hub.PublishTo(inNamespace("c"), "notify", &fluxdv1.ImageNotification{Repository: "reg/c-app"})
	if got := readEvents(t, unscoped, 2); len(got) != 2 {
		t.Errorf("the unscoped caller got %v, want both notifications", got)
	}
	// The scoped caller's first event is c's: b's was never sent to it.
	sc := bufio.NewScanner(scoped.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, "reg/c-app") {
				t.Errorf("the scoped caller got %s, want only reg/c-app", line)
			}
			break
		}
	}
}

// signInFrom signs in with X-Forwarded-For set to xff.
func signInFrom(t *testing.T, srv *httptest.Server, token, xff string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/api/session", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Behind trusted proxies (--trusted-proxies), failed sign-ins count per
// client as X-Forwarded-For names it, read from the right; from any other
// peer the header is ignored.
func TestSignInFailuresCountPerForwardedClient(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		proxies []string
		// after 10 failures from attacker, other's wrong token answers
		otherWrong int
	}{
		{"behind a trusted proxy", []string{"127.0.0.0/8"}, http.StatusUnauthorized},
		{"no trusted proxy: the header is not believed", nil, http.StatusTooManyRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newTestServer(t)
			h := srv.Config.Handler.(*Handler)
			p, err := clientkey.ParseProxies(tc.proxies)
			if err != nil {
				t.Fatal(err)
			}
			h.cfg.TrustedProxies = p
			// The attacker writes an address of its own at the left:
			// the proxy appends the real one, which is what counts.
			for i := 0; i < 10; i++ {
				signInFrom(t, srv, "fxd_wrong", "192.0.2.99, 203.0.113.5")
			}
			if code := signInFrom(t, srv, "fxd_wrong", "203.0.113.5"); code != http.StatusTooManyRequests {
				t.Errorf("the attacker's 11th failure: %d, want 429", code)
			}
			if code := signInFrom(t, srv, "fxd_wrong", "198.51.100.7"); code != tc.otherWrong {
				t.Errorf("another client's failure: %d, want %d", code, tc.otherWrong)
			}
			if code := signInFrom(t, srv, "fxd_viewer", "203.0.113.5"); code != http.StatusOK {
				t.Errorf("a good token from the attacker's address: %d, want 200", code)
			}
		})
	}
}

// Failed sign-ins count per client as the gRPC API's connections do: an
// IPv6 client rotating its addresses within one /64 is one client, and
// is limited after 10 failures however many addresses it uses.
func TestSignInFailuresCountPerIPv6Slash64(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	h := srv.Config.Handler.(*Handler)
	p, err := clientkey.ParseProxies([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.TrustedProxies = p
	for i := range 10 {
		if code := signInFrom(t, srv, "fxd_wrong", fmt.Sprintf("2001:db8:7:7::%x", i+1)); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, code)
		}
	}
	if code := signInFrom(t, srv, "fxd_wrong", "2001:db8:7:7:ffff::1"); code != http.StatusTooManyRequests {
		t.Errorf("an 11th failure from another address of the same /64: %d, want 429", code)
	}
	if code := signInFrom(t, srv, "fxd_wrong", "2001:db8:7:8::1"); code != http.StatusUnauthorized {
		t.Errorf("a failure from the next /64: %d, want 401", code)
	}
}

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
