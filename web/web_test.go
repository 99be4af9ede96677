package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
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

func TestHubKeepsTheLastEventsInOrder(t *testing.T) {
	t.Parallel()
	h := NewHub(3)
	for i := 0; i < 4; i++ {
		h.Publish("a", "job", &fluxdv1.Job{Id: string(rune('0' + i))})
	}
	evs, ok, _ := h.since(2)
	if !ok || len(evs) != 2 || evs[0].ID != 3 || evs[1].ID != 4 {
		t.Errorf("since(2) = %v, %v; want events 3 and 4", evs, ok)
	}
	if evs, ok, _ := h.since(4); !ok || len(evs) != 0 {
		t.Errorf("since(last) = %v, %v; want none, ok", evs, ok)
	}
	if _, ok, _ := h.since(9); ok {
		t.Error("since(a number not given yet) is ok")
	}
	for i := 0; i < 4; i++ {
		h.Publish("a", "job", &fluxdv1.Job{})
	}
	if _, ok, _ := h.since(1); ok {
		t.Error("since(an event no longer kept) is ok; want a reset")
	}
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

// The event stream sends a caller only its instance's events (and
// notifications, which are everyone's), and a stream resumed with
// Last-Event-ID gets what it missed; an unknown ID gets a reset.
func TestEventsAreInstancesOwnAndResumable(t *testing.T) {
	srv, hub := newTestServer(t)
	resp := openEvents(t, srv, "fxd_viewer", "")
	hello := readEvents(t, resp, 1)
	if len(hello) != 1 || !strings.HasPrefix(hello[0], "hello ") {
		t.Fatalf("first event %v, want hello", hello)
	}
	hub.Publish("b", "job", &fluxdv1.Job{Id: "theirs"})
	hub.Publish("a", "job", &fluxdv1.Job{Id: "ours"})
	hub.Publish("", "notify", &fluxdv1.ImageNotification{Repository: "r/app"})
	got := readEvents(t, resp, 2)
	if len(got) != 2 || !strings.HasPrefix(got[0], "job ") || !strings.HasPrefix(got[1], "notify ") {
		t.Fatalf("events %v, want our job then the notification", got)
	}
	resp.Body.Close()

	// Missed while away: resumed from the job's ID.
	hub.Publish("a", "log", &fluxdv1.JobLogLine{Text: "missed"})
	jobID := strings.Fields(got[0])[1]
	again := readEvents(t, openEvents(t, srv, "fxd_viewer", jobID), 2)
	if len(again) != 2 || !strings.HasPrefix(again[0], "notify ") || !strings.HasPrefix(again[1], "log ") {
		t.Errorf("resumed events %v, want the notification and the missed log line", again)
	}
	reset := readEvents(t, openEvents(t, srv, "fxd_viewer", "0000-1"), 1)
	if len(reset) != 1 || !strings.HasPrefix(reset[0], "reset ") {
		t.Errorf("a stream resumed from another process's ID: %v, want reset", reset)
	}
}

// Sign-in keeps the token on the server: the cookie is a random key,
// HttpOnly and SameSite=Strict; a call with the cookie needs the CSRF
// token and the page's origin; sign-out ends the session.
func TestSessionCookieAndCSRF(t *testing.T) {
	srv, _ := newTestServer(t)
	post := func(path, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
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
