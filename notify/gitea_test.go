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
