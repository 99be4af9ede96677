package notify_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/notify"
)

// TestCommitStatusOnARealGitea sets commit statuses on a real Gitea (a
// Go program: FLUXD_GITEA_BIN names a binary built from
// code.gitea.io/gitea in its source tree, whose options/ (translations)
// it reads, see docs/notifications.md) through the Sender: a
// release that starts rolling out, then succeeds, leaves the commit with
// a pending and then a success status of context fluxd/team, as Gitea's
// own API lists them.
func TestCommitStatusOnARealGitea(t *testing.T) {
	bin := os.Getenv("FLUXD_GITEA_BIN")
	if bin == "" {
		t.Skip("FLUXD_GITEA_BIN is not set: no Gitea binary to test against (build one with: go build -tags 'sqlite sqlite_unlock_notify' in a copy of code.gitea.io/gitea@v1.27.3)")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := filepath.Join(dir, "app.ini")
	user, _ := os.LookupEnv("USER")
	if user == "" {
		user = "root"
	}
	writeFile(t, dir, "app.ini", fmt.Sprintf(`APP_NAME = fluxd test
RUN_USER = %[4]s
WORK_PATH = %[1]s
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s/
DISABLE_SSH = true
OFFLINE_MODE = true
STATIC_ROOT_PATH = %[5]s
[database]
DB_TYPE = sqlite3
PATH = %[1]s/gitea.db
[repository]
ROOT = %[1]s/repos
[security]
INSTALL_LOCK = true
SECRET_KEY = fluxd-test-secret-key
INTERNAL_TOKEN = eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYmYiOjE3MDAwMDAwMDB9.fluxdtestfluxdtestfluxdtestfluxdtest0000
[log]
MODE = file
ROOT_PATH = %[1]s/log
LEVEL = Warn
[service]
DISABLE_REGISTRATION = true
`, dir, port, base, user, filepath.Dir(bin)))
	env := append(os.Environ(), "GITEA_WORK_DIR="+dir, "HOME="+dir)
	if os.Getuid() == 0 {
		// Gitea refuses root unless told; the test machine runs as root
		// and Gitea's files are in a temporary directory.
		env = append(env, "GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true")
	}
	gitea := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--config", ini)...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gitea %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	gitea("migrate")
	gitea("admin", "user", "create", "--admin", "--username", "fluxd", "--password", "fluxd-test-pw-1", "--email", "fluxd@example.invalid", "--must-change-password=false")
	// The token is the last line (Gitea may log a warning before it).
	lines := strings.Split(strings.TrimSpace(gitea("admin", "user", "generate-access-token", "--username", "fluxd", "--token-name", "notify", "--scopes", "write:repository,write:user", "--raw")), "\n")
	token := strings.TrimSpace(lines[len(lines)-1])
	srv := exec.Command(bin, "web", "--config", ini)
	srv.Env, srv.Dir = env, dir
	var serr bytes.Buffer
	srv.Stdout, srv.Stderr = &serr, &serr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	api := func(method, path string, body any, out any) int {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, base+"/api/v1"+path, rd)
		req.Header.Set("Authorization", "token "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(base + "/api/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea did not answer (%v, %v): %s", resp, err, serr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	if code := api("GET", "/user", nil, nil); code != 200 {
		t.Fatalf("gitea refuses the token: HTTP %d", code)
	}
	if code := api("POST", "/user/repos", map[string]any{"name": "manifests", "auto_init": true, "default_branch": "main"}, nil); code != 201 {
		t.Fatalf("creating the repository: HTTP %d", code)
	}
	var branch struct{ Commit struct{ ID string } }
	if code := api("GET", "/repos/fluxd/manifests/branches/main", nil, &branch); code != 200 || branch.Commit.ID == "" {
		t.Fatalf("the branch: HTTP %d %+v", code, branch)
	}
	sha := branch.Commit.ID

	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: gitea
    type: gitea
    url: %s/api/v1
    repository: fluxd/manifests
    secretFile: DIR/token
`, base))
	writeFile(t, f.dir, "token", token)
	f.start(t)
	f.started(t, "gitea")
	ev := release
	ev.Commit = sha
	f.notifyStarted(t, ev)
	var statuses []struct {
		State       string `json:"status"`
		Context     string `json:"context"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	waitFor(t, "the pending status", func() bool {
		api("GET", "/repos/fluxd/manifests/commits/"+sha+"/statuses", nil, &statuses)
		return len(statuses) == 1
	})
	if s := statuses[0]; s.State != "pending" || s.Context != "fluxd/team" || s.TargetURL != "https://fluxd.example/#/job/job-7" {
		t.Errorf("the status while rolling out: %+v", s)
	}
	f.record(t, ev)
	waitFor(t, "the success status", func() bool {
		api("GET", "/repos/fluxd/manifests/commits/"+sha+"/statuses", nil, &statuses)
		return len(statuses) == 2
	})
	var combined struct{ State string }
	api("GET", "/repos/fluxd/manifests/commits/"+sha+"/status", nil, &combined)
	if combined.State != "success" {
		t.Errorf("the commit's combined status is %q, want success (statuses: %+v)", combined.State, statuses)
	}
}

// TestEachReceiverTypeGetsItsFormat sends a release (started, then
// succeeded) to one receiver of each type, each at a local HTTP server
// that checks what that type's documentation promises.
func TestEachReceiverTypeGetsItsFormat(t *testing.T) {
	rec := newRecorder(t)
	u := rec.srv.URL
	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: hook
    type: webhook
    url: %[1]s/hook
    secretFile: DIR/hmac
  - name: chat
    type: slack
    url: %[1]s/slack/T000/B000/XXXX
  - name: teams
    type: teams
    url: %[1]s/teams
  - name: discord
    type: discord
    secretFile: DIR/discord-url
  - name: gh
    type: github
    url: %[1]s/gh
    repository: org/manifests
    secretFile: DIR/gh-token
  - name: gl
    type: gitlab
    url: %[1]s/gl/api/v4
    repository: group/manifests
    secretFile: DIR/gl-token
  - name: gt
    type: gitea
    url: %[1]s/gitea/api/v1
    repository: org/manifests
    secretFile: DIR/gt-token
`, u))
	writeFile(t, f.dir, "hmac", "s3cret-key\n")
	writeFile(t, f.dir, "discord-url", u+"/discord/123/abc\n")
	writeFile(t, f.dir, "gh-token", "ghp_TOKEN\n")
	writeFile(t, f.dir, "gl-token", "glpat-TOKEN\n")
	writeFile(t, f.dir, "gt-token", "gitea-TOKEN\n")
	f.start(t)
	f.started(t, "hook", "chat", "teams", "discord", "gh", "gl", "gt")
	f.notifyStarted(t, release)
	f.record(t, release)
	// 4 message receivers and 3 forges, 2 notices each.
	waitFor(t, "14 deliveries", func() bool { return len(rec.got()) >= 14 })
	time.Sleep(100 * time.Millisecond)
	hits := rec.got()
	if len(hits) != 14 {
		t.Fatalf("got %d requests, want 14", len(hits))
	}
	by := map[string][]hit{}
	for _, h := range hits {
		if h.Header.Get(notify.HeaderEventID) == "" {
			t.Errorf("%s: no %s header", h.Path, notify.HeaderEventID)
		}
		key := strings.SplitN(strings.TrimPrefix(h.Path, "/"), "/", 2)[0]
		by[key] = append(by[key], h)
	}
	for key, hs := range by {
		if len(hs) != 2 || hs[0].Header.Get(notify.HeaderEventID) == hs[1].Header.Get(notify.HeaderEventID) {
			t.Errorf("%s: %d requests; want 2 with distinct event IDs", key, len(hs))
		}
	}

	t.Run("webhook", func(t *testing.T) {
		h := by["hook"][1]
		if got, want := h.Header.Get(notify.HeaderSignature), notify.Sign([]byte("s3cret-key"), h.Body); got != want || !strings.HasPrefix(got, "sha256=") {
			t.Errorf("signature %q, want %q", got, want)
		}
		m := decode(t, h.Body)
		if m["kind"] != "release.succeeded" || m["instance"] != "team" || m["commit"] != release.Commit || m["user"] != "ann" || m["job"] != "job-7" ||
			m["url"] != "https://fluxd.example/#/job/job-7" || m["id"] != h.Header.Get(notify.HeaderEventID) {
			t.Errorf("webhook body: %s", h.Body)
		}
		ch := m["changes"].([]any)[0].(map[string]any)
		if ch["from"] != "reg.example/app:1.0" || ch["to"] != "reg.example/app:1.1" || ch["service"] != "prod:deployment/web" {
			t.Errorf("webhook changes: %v", ch)
		}
		if decode(t, by["hook"][0].Body)["kind"] != "release.started" {
			t.Errorf("first webhook: %s", by["hook"][0].Body)
		}
	})
	t.Run("slack", func(t *testing.T) {
		m := decode(t, by["slack"][1].Body)
		text := m["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"].(string)
		for _, want := range []string{"release succeeded", "prod:deployment/web", "reg.example/app:1.0 → reg.example/app:1.1", "commit 0123456789ab", "<https://fluxd.example/#/job/job-7|Open in fluxd>"} {
			if !strings.Contains(text, want) {
				t.Errorf("slack text %q lacks %q", text, want)
			}
		}
		if s, _ := m["text"].(string); !strings.Contains(s, "release succeeded") {
			t.Errorf("slack fallback text %q", s)
		}
	})
	t.Run("teams", func(t *testing.T) {
		m := decode(t, by["teams"][1].Body)
		att := m["attachments"].([]any)[0].(map[string]any)
		card := att["content"].(map[string]any)
		if m["type"] != "message" || att["contentType"] != "application/vnd.microsoft.card.adaptive" || card["type"] != "AdaptiveCard" {
			t.Errorf("teams body: %s", by["teams"][1].Body)
		}
		if !strings.Contains(string(by["teams"][1].Body), "reg.example/app:1.1") {
			t.Errorf("teams card lacks the image: %s", by["teams"][1].Body)
		}
	})
	t.Run("discord", func(t *testing.T) {
		h := by["discord"][1]
		if h.Path != "/discord/123/abc" {
			t.Errorf("discord path %s: the URL from secretFile", h.Path)
		}
		m := decode(t, h.Body)
		e := m["embeds"].([]any)[0].(map[string]any)
		if !strings.Contains(e["title"].(string), "release succeeded") || e["url"] != "https://fluxd.example/#/job/job-7" || !strings.Contains(e["description"].(string), "reg.example/app:1.1") {
			t.Errorf("discord body: %s", h.Body)
		}
	})
	sha := release.Commit
	for _, tc := range []struct {
		key, path, authHeader, auth, nameField, failState string
	}{
		{"gh", "/gh/repos/org/manifests/statuses/" + sha, "Authorization", "token ghp_TOKEN", "context", ""},
		{"gl", "/gl/api/v4/projects/group%2Fmanifests/statuses/" + sha, "Private-Token", "glpat-TOKEN", "name", ""},
		{"gitea", "/gitea/api/v1/repos/org/manifests/statuses/" + sha, "Authorization", "token gitea-TOKEN", "context", ""},
	} {
		t.Run(tc.key, func(t *testing.T) {
			hs := by[tc.key]
			for i, want := range []string{"pending", "success"} {
				h := hs[i]
				if h.Path != tc.path || h.Header.Get(tc.authHeader) != tc.auth {
					t.Errorf("request %d: path %s (want %s), %s %q (want %q)", i, h.Path, tc.path, tc.authHeader, h.Header.Get(tc.authHeader), tc.auth)
				}
				m := decode(t, h.Body)
				if m["state"] != want || m[tc.nameField] != "fluxd/team" || m["target_url"] != "https://fluxd.example/#/job/job-7" {
					t.Errorf("request %d: body %s; want state %s, %s fluxd/team", i, h.Body, want, tc.nameField)
				}
			}
		})
	}
}

// TestForgeStatusFailure: a failed release sets "failure" (GitLab:
// "failed") on its commit; a lock sets none.
func TestForgeStatusFailure(t *testing.T) {
	rec := newRecorder(t)
	f := newFixture(t, fmt.Sprintf(`receivers:
  - name: gh
    type: github
    url: %[1]s
    repository: org/m
    secretFile: DIR/t
  - name: gl
    type: gitlab
    url: %[1]s
    repository: org/m
    secretFile: DIR/t
`, rec.srv.URL))
	writeFile(t, f.dir, "t", "tok")
	f.start(t)
	f.started(t, "gh", "gl")
	f.record(t, history.Event{Instance: "team", Type: history.Lock, User: "ann", Services: []string{"prod:deployment/web"}, Commit: "abc"})
	failed := release
	failed.Type, failed.Error = history.Failed, "rollout of prod:deployment/web did not finish"
	f.record(t, failed)
	waitFor(t, "2 statuses", func() bool { return len(rec.got()) >= 2 })
	time.Sleep(100 * time.Millisecond)
	states := map[string]string{}
	for _, h := range rec.got() {
		states[h.Header.Get("Private-Token")+h.Header.Get("Authorization")] = decode(t, h.Body)["state"].(string)
	}
	if len(rec.got()) != 2 || states["token tok"] != "failure" || states["tok"] != "failed" {
		t.Errorf("statuses %v from %d requests; want GitHub failure and GitLab failed, nothing for the lock", states, len(rec.got()))
	}
}
