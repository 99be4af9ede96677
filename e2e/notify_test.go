package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/notify"
)

// receiverHit is one request a test receiver answered.
type receiverHit struct {
	Path, EventID, Signature, Auth string
	Body                           []byte
	Code                           int
}

// testReceivers is one local HTTP server standing for every receiver
// (a path each), down (503) until up.
type testReceivers struct {
	mu   sync.Mutex
	up   bool
	hits []receiverHit
	srv  *httptest.Server
}

func newTestReceivers(t *testing.T) *testReceivers {
	r := &testReceivers{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := http.StatusServiceUnavailable
		if r.up {
			code = http.StatusOK
		}
		auth := req.Header.Get("Authorization")
		r.hits = append(r.hits, receiverHit{Path: req.URL.EscapedPath(), EventID: req.Header.Get(notify.HeaderEventID),
			Signature: req.Header.Get(notify.HeaderSignature), Auth: auth, Body: b, Code: code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *testReceivers) setUp(up bool) {
	r.mu.Lock()
	r.up = up
	r.mu.Unlock()
}

// delivered are the requests under prefix that were answered 200.
func (r *testReceivers) delivered(prefix string) []receiverHit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receiverHit
	for _, h := range r.hits {
		if h.Code == http.StatusOK && strings.HasPrefix(h.Path, prefix) {
			out = append(out, h)
		}
	}
	return out
}

func (r *testReceivers) attempts(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hits {
		if strings.HasPrefix(h.Path, prefix) {
			n++
		}
	}
	return n
}

// config is a --notify-config with a webhook, a Slack and a GitHub
// receiver at r, written under dir.
func (r *testReceivers) config(t *testing.T, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "hook-key")
	tok := filepath.Join(dir, "gh-token")
	localstack.NoteSecret("the notification webhook key", "e2e-hook-key")
	localstack.NoteSecret("the notification GitHub token", "ghp_e2e_token")
	for p, v := range map[string]string{key: "e2e-hook-key\n", tok: "ghp_e2e_token\n"} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "notify.yaml")
	text := fmt.Sprintf(`receivers:
  - name: hook
    type: webhook
    url: %[1]s/hook
    secretFile: %[2]s
    timeout: 2s
  - name: chat
    type: slack
    url: %[1]s/slack/T0/B0/XYZ
    timeout: 2s
  - name: gh
    type: github
    url: %[1]s/gh
    repository: e2e/manifests
    secretFile: %[3]s
    timeout: 2s
`, r.srv.URL, key, tok)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// kinds are the kinds of the webhook's delivered messages, in order,
// each checked for its signature; it fails on an event delivered twice.
func hookKinds(t *testing.T, r *testReceivers) []string {
	t.Helper()
	var kinds []string
	seen := map[string]bool{}
	for _, h := range r.delivered("/hook") {
		if want := notify.Sign([]byte("e2e-hook-key"), h.Body); h.Signature != want {
			t.Errorf("webhook signature %q, want %q", h.Signature, want)
		}
		if seen[h.EventID] {
			t.Errorf("event %s delivered twice to the webhook", h.EventID)
		}
		seen[h.EventID] = true
		var m struct{ Kind string }
		if err := json.Unmarshal(h.Body, &m); err != nil {
			t.Fatalf("webhook body: %v", err)
		}
		kinds = append(kinds, m.Kind)
	}
	return kinds
}

// waitForLog waits until fluxd's log holds text.
func waitForLog(t testing.TB, name, text string) {
	t.Helper()
	if err := poll(context.Background(), 60*time.Second, func() error {
		b, _ := os.ReadFile(stack.Log(name))
		if !strings.Contains(string(b), text) {
			return fmt.Errorf("the log of %s does not say %q yet", name, text)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// signalAndWait signals fluxd and waits until it has exited.
func signalAndWait(t *testing.T, f *localstack.Fluxd, sig syscall.Signal) {
	t.Helper()
	if err := f.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if !f.Wait(30 * time.Second) {
		t.Fatalf("fluxd %d still runs 30 s after %v", f.PID, sig)
	}
}

// TestNotificationsOfARelease: a release on the stack produces a signed
// webhook, a Slack message and GitHub commit statuses (pending, then
// success on the released commit), each delivered once although the
// receivers are down until after fluxd was stopped (SIGTERM) and started
// again; then a lock and an unlock made while the receivers are down
// reach them after fluxd is killed (SIGKILL) and started again.
func TestNotificationsOfARelease(t *testing.T) {
	sharedFluxd(t)
	img := faultService(t, "notify-rel", "notifyapp", 1, 0, "1.1.0")
	recv := newTestReceivers(t)
	cfg := recv.config(t, t.TempDir())
	name := "fluxd-notify"
	args := []string{"--notify-config=" + cfg, "--web-url=https://fluxd.example", "--rollout-timeout=60s", "--git-poll-interval=10m", "--shutdown-grace=5s"}
	f := startFaultFluxd(t, name, "notify-rel", nil, args...)
	waitForLog(t, name, `msg="delivering notifications" component=notify receiver=gh`)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=nora"}
	if out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "notifyapp", "-i", img+"1.1.0"); code != 0 {
		t.Fatalf("release: %s%s", out, stderr)
	}
	commit := remoteHead(t)
	// The receivers are down: each has been tried.
	if err := poll(context.Background(), 30*time.Second, func() error {
		for _, p := range []string{"/hook", "/slack", "/gh"} {
			if recv.attempts(p) == 0 {
				return fmt.Errorf("%s not tried yet", p)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	signalAndWait(t, f, syscall.SIGTERM)
	recv.setUp(true)
	f = startFaultFluxd(t, name, "notify-rel", f.Tokens, args...)
	env[0] = "FLUX_URL=" + f.Addr
	if err := poll(context.Background(), 60*time.Second, func() error {
		if len(recv.delivered("/hook")) < 2 || len(recv.delivered("/slack")) < 2 || len(recv.delivered("/gh")) < 2 {
			return fmt.Errorf("delivered: hook %d, slack %d, github %d", len(recv.delivered("/hook")), len(recv.delivered("/slack")), len(recv.delivered("/gh")))
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; log: %s", err, stack.Log(name))
	}
	time.Sleep(time.Second) // nothing more should come
	if got := hookKinds(t, recv); strings.Join(got, ",") != "release.started,release.succeeded" {
		t.Errorf("webhook deliveries %q, want release.started then release.succeeded, once each", got)
	}
	var body struct {
		Commit, User, URL, Job string
		Changes                []struct{ From, To string }
	}
	json.Unmarshal(recv.delivered("/hook")[1].Body, &body)
	if body.Commit != commit || body.User != "nora" || body.Job == "" || body.URL != "https://fluxd.example/#/job/"+body.Job ||
		len(body.Changes) != 1 || body.Changes[0].From != img+"1.0.0" || body.Changes[0].To != img+"1.1.0" {
		t.Errorf("the webhook's release: %s (commit in git %s)", recv.delivered("/hook")[1].Body, commit)
	}
	var states []string
	for _, h := range recv.delivered("/gh") {
		var s struct{ State, Context string }
		json.Unmarshal(h.Body, &s)
		states = append(states, s.State)
		if h.Path != "/gh/repos/e2e/manifests/statuses/"+commit || h.Auth != "token ghp_e2e_token" || s.Context != "fluxd/"+instance {
			t.Errorf("GitHub status: %s %s (auth %q)", h.Path, h.Body, h.Auth)
		}
	}
	if strings.Join(states, ",") != "pending,success" {
		t.Errorf("GitHub statuses %v, want pending then success", states)
	}
	if s := recv.delivered("/slack"); len(s) != 2 || !strings.Contains(string(s[1].Body), img+"1.1.0") {
		t.Errorf("Slack messages: %d", len(s))
	}

	// SIGKILL with a lock and an unlock undelivered.
	recv.setUp(false)
	before := recv.attempts("/hook")
	for _, cmd := range [][]string{{"lock", "notifyapp", "-m", "incident"}, {"unlock", "notifyapp"}} {
		if out, stderr, code := fluxctl(t, env, cmd...); code != 0 {
			t.Fatalf("%v: %s%s", cmd, out, stderr)
		}
	}
	if err := poll(context.Background(), 30*time.Second, func() error {
		if recv.attempts("/hook") == before {
			return fmt.Errorf("the lock not tried yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	signalAndWait(t, f, syscall.SIGKILL)
	recv.setUp(true)
	metrics, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	startFaultFluxd(t, name, "notify-rel", f.Tokens, append(args, "--metrics-listen="+metrics)...)
	if err := poll(context.Background(), 60*time.Second, func() error {
		if n := len(recv.delivered("/hook")); n < 4 {
			return fmt.Errorf("webhook: %d delivered", n)
		}
		// What the metrics say of it, once the sender looked again.
		if d := metricWith(t, metrics, "fluxd_notify_queue_depth", `receiver="hook"`); d != 0 {
			return fmt.Errorf("fluxd_notify_queue_depth{receiver=hook} = %v", d)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; log: %s", err, stack.Log(name))
	}
	if n := metricWith(t, metrics, "fluxd_notify_deliveries_total", `receiver="hook"`, `outcome="delivered"`); n != 2 {
		t.Errorf("fluxd_notify_deliveries_total{receiver=hook,outcome=delivered} = %v after the restart, want 2 (the lock and the unlock)", n)
	}
	time.Sleep(time.Second)
	if got := hookKinds(t, recv); strings.Join(got, ",") != "release.started,release.succeeded,lock,unlock" {
		t.Errorf("webhook deliveries %q, want the release's two, then lock, unlock", got)
	}
	if n := len(recv.delivered("/gh")); n != 2 {
		t.Errorf("GitHub got %d statuses; a lock sets none", n)
	}
	if b, _ := os.ReadFile(stack.Log(name)); strings.Contains(string(b), "ghp_e2e_token") || strings.Contains(string(b), "e2e-hook-key") {
		t.Error("fluxd's log holds a receiver's secret")
	}
}

// TestNotificationsAfterTheLeaderDies: two replicas on PostgreSQL; a lock
// and an unlock are made on the leader while the receiver is down; the
// leader is killed; the other replica takes the lease and delivers both,
// in order.
func TestNotificationsAfterTheLeaderDies(t *testing.T) {
	sharedFluxd(t)
	faultService(t, "notify-ha", "notifyha", 1, 0)
	url, srv := pgserver.Database(t)
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	recv := newTestReceivers(t)
	cfg := recv.config(t, t.TempDir())
	lease := "fluxd-e2e-notify"
	args := []string{"--notify-config=" + cfg, "--git-poll-interval=10m", "--leader-elect", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile()}
	a := startFaultFluxd(t, "fluxd-notify-a", "notify-ha", nil, args...)
	waitForLog(t, "fluxd-notify-a", `msg="delivering notifications" component=notify receiver=hook`)
	b := startFaultFluxd(t, "fluxd-notify-b", "notify-ha", a.Tokens, append(args, "--tokens-file="+a.TokensFile)...)
	_ = b
	env := []string{"FLUX_URL=" + a.Addr, "FLUX_TOKEN=" + a.Tokens["deployer"], "USER=lee"}
	for _, cmd := range [][]string{{"lock", "notifyha", "-m", "hold"}, {"unlock", "notifyha"}} {
		if out, stderr, code := fluxctl(t, env, cmd...); code != 0 {
			t.Fatalf("%v: %s%s", cmd, out, stderr)
		}
	}
	if err := poll(context.Background(), 30*time.Second, func() error {
		if recv.attempts("/hook") == 0 {
			return fmt.Errorf("the lock not tried yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	signalAndWait(t, a, syscall.SIGKILL)
	recv.setUp(true)
	if err := poll(context.Background(), 60*time.Second, func() error {
		if n := len(recv.delivered("/hook")); n < 2 {
			return fmt.Errorf("webhook: %d delivered", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; log of b: %s", err, stack.Log("fluxd-notify-b"))
	}
	time.Sleep(time.Second)
	if got := hookKinds(t, recv); strings.Join(got, ",") != "lock,unlock" {
		t.Errorf("webhook deliveries %q, want lock, unlock", got)
	}
	if n := len(recv.delivered("/slack")); n != 2 {
		t.Errorf("Slack got %d messages, want 2", n)
	}
	if b, _ := os.ReadFile(stack.Log("fluxd-notify-b")); !strings.Contains(string(b), "notification delivered") {
		t.Error("replica b's log does not show it delivered")
	}
}
