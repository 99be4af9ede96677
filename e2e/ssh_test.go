package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

// fluxd reaches the stack's repository over SSH, through Debian's sshd
// with git-shell. With no key of its own it makes one and, while the
// server refuses it, serves anyway: 'fluxctl identity' prints the key,
// /readyz on --health-listen says 503 and why, and list-services says
// git cannot be read yet, naming the key to add. Once the key is added to
// sshd's authorized keys, the same fluxd (no restart) clones within its
// retry, becomes ready, and pushes a release, which the git CLI sees in
// the remote. A host whose key --git-ssh-known-hosts-file does not list
// is refused, with the fingerprint of the key it presented.
func TestGitOverSSHWithADeployKey(t *testing.T) {
	sharedFluxd(t)
	if os.Geteuid() != 0 {
		t.Skip("sshd serves git over SSH only when run as root")
	}
	srv, err := stack.StartGitSSH(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	img := faultService(t, "ssh", "sshapp", 1, 0, "1.1.0")
	const name = "fluxd-ssh"
	health := freeAddr(t)
	sshArgs := []string{"--git-url=" + srv.GitURL, "--git-ssh-known-hosts-file=" + srv.KnownHostsFile(), "--git-poll-interval=10m",
		"--git-clone-retry-max=2s", "--health-listen=" + health}
	pubFile := filepath.Join(stack.Dir, name, "ssh", "identity.pub")
	_ = os.RemoveAll(filepath.Join(stack.Dir, name, "ssh"))

	f := startFaultFluxd(t, name, "ssh", nil, sshArgs...)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=sam"}
	pub := readTrimmed(t, pubFile)
	if !strings.HasPrefix(pub, "ssh-ed25519 ") {
		t.Fatalf("the generated key is %q, want ed25519", pub)
	}

	t.Run("before the key is added: identity, not ready, and a humane error", func(t *testing.T) {
		out, stderr, code := fluxctl(t, env, "identity")
		if code != 0 || strings.TrimSpace(out) != pub {
			t.Errorf("fluxctl identity: exit %d, %q%s; want the key in %s: %q", code, out, stderr, pubFile, pub)
		}
		// With a token, why (the key to add); without one, which part
		// only ([security-2] 4).
		status, body := httpGetWith(t, "http://"+health+"/readyz", f.Tokens["viewer"])
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "refused fluxd's key") || !strings.Contains(body, pub) {
			t.Errorf("/readyz with a token before the key is added: %d %q; want 503 naming the refused key", status, body)
		}
		if status, body := httpGet(t, "http://"+health+"/readyz"); status != http.StatusServiceUnavailable || body != "not ready: git\n" {
			t.Errorf("/readyz without a token before the key is added: %d %q; want 503 %q only", status, body, "not ready: git")
		}
		if status, body := httpGet(t, "http://"+health+"/healthz"); status != http.StatusOK {
			t.Errorf("/healthz: %d %q, want 200 while fluxd serves", status, body)
		}
		out, stderr, code = fluxctl(t, env, "list-services")
		for _, want := range []string{"fluxd cannot read git yet", pub, "deploy key", "no restart"} {
			if code == 0 || !strings.Contains(stderr, want) {
				t.Errorf("list-services before the key is added: exit %d, stderr lacks %q:\n%s%s", code, want, out, stderr)
			}
		}
		if strings.Contains(stderr, "cannot reach fluxd") {
			t.Errorf("list-services says fluxd cannot be reached, but it answered:\n%s", stderr)
		}
		if log := readTrimmed(t, stack.Log(name)); !strings.Contains(log, pub) {
			t.Errorf("fluxd's log does not show the public key %s", pub)
		}
	})

	t.Run("unknown host key", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(empty, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ssh-keygen", "-l", "-f", filepath.Join(srv.Dir, "ssh_host_ed25519_key.pub")).Output()
		if err != nil {
			t.Fatal(err)
		}
		fingerprint := strings.Fields(string(out))[1] // "256 SHA256:… comment (ED25519)"
		u := startFaultFluxd(t, "fluxd-ssh-unknown-host", "ssh", nil, "--git-url="+srv.GitURL, "--git-ssh-known-hosts-file="+empty)
		_, stderr, code := fluxctl(t, []string{"FLUX_URL=" + u.Addr, "FLUX_TOKEN=" + u.Tokens["viewer"]}, "list-services")
		for _, want := range []string{"is not in --git-ssh-known-hosts-file", fingerprint, "ssh-keyscan -p"} {
			if code == 0 || !strings.Contains(stderr, want) {
				t.Errorf("list-services through a host whose key is unknown: exit %d, stderr lacks %q:\n%s", code, want, stderr)
			}
		}
		_ = u.Signal(syscall.SIGTERM)
	})

	if err := srv.Authorize(pub); err != nil {
		t.Fatal(err)
	}
	// Ready within the retry (at most 2s apart), without a restart.
	authorized := time.Now()
	deadline := authorized.Add(30 * time.Second)
	for {
		status, body := httpGet(t, "http://"+health+"/readyz")
		if status == http.StatusOK {
			t.Logf("ready %v after the key was authorized (--git-clone-retry-max=2s)", time.Since(authorized).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fluxd not ready 30s after its key was added: %d %q", status, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, stderr, code := fluxctl(t, env, "list-services"); code != 0 || !strings.Contains(out, "sshapp") {
		t.Fatalf("list-services over SSH: exit %d\n%s%s", code, out, stderr)
	}
	before := gitCLI(t, strings.TrimPrefix(stack.GitURL, "file://"), "rev-parse", stack.GitBranch)
	if out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "sshapp", "-i", img+"1.1.0"); code != 0 {
		t.Fatalf("release over SSH: exit %d\n%s%s", code, out, stderr)
	}
	// The git CLI reads the bare repository itself, not through sshd.
	commits := commitsSince(t, before, "ssh")
	if len(commits) != 1 || !strings.Contains(commits[0], "1.1.0") {
		t.Errorf("commits pushed over SSH under ssh/: %q, want one release of 1.1.0", commits)
	}
	waitRolledOut(t, kubeClient(t), map[string][]string{"sshapp": {"app=" + img + "1.1.0"}})
}

// httpGet returns a GET's status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return httpGetWith(t, url, "")
}

// httpGetWith is httpGet with a bearer token ("" none).
func httpGetWith(t *testing.T, url, token string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
