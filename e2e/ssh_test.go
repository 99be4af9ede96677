package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fluxd reaches the stack's repository over SSH, through Debian's sshd
// with git-shell: with no key of its own it makes one, and the server's
// refusal names it as the deploy key to add; once it is added (kept
// across the restart) fluxd clones, lists, and pushes a release, which
// the git CLI sees in the remote; 'fluxctl identity' prints the key it
// uses. A host whose key --git-ssh-known-hosts-file does not list is
// refused, with the fingerprint of the key it presented.
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
	sshArgs := []string{"--git-url=" + srv.GitURL, "--git-ssh-known-hosts-file=" + srv.KnownHostsFile(), "--git-poll-interval=10m"}
	pubFile := filepath.Join(stack.Dir, name, "ssh", "identity.pub")

	t.Run("a key not added is refused, naming the key to add", func(t *testing.T) {
		startFails(t, name, sshArgs, "refused fluxd's key", "add this public key as a deploy key with write access")
		pub := readTrimmed(t, pubFile)
		if !strings.HasPrefix(pub, "ssh-ed25519 ") {
			t.Fatalf("the generated key is %q, want ed25519", pub)
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
		args := []string{"--git-url=" + srv.GitURL, "--git-ssh-known-hosts-file=" + empty}
		startFails(t, "fluxd-ssh-unknown-host", args, "is not in --git-ssh-known-hosts-file", fingerprint, "ssh-keyscan -p")
	})

	pub := readTrimmed(t, pubFile)
	if err := srv.Authorize(pub); err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, name, "ssh", nil, sshArgs...)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=sam"}

	out, stderr, code := fluxctl(t, env, "identity")
	if code != 0 || strings.TrimSpace(out) != pub {
		t.Errorf("fluxctl identity: exit %d, %q%s; want the key in %s: %q", code, out, stderr, pubFile, pub)
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

// startFails starts a fluxd that must exit before it serves, and checks
// that its log says each of want.
func startFails(t *testing.T, name string, args []string, want ...string) {
	t.Helper()
	ctx := testContext(t)
	_ = os.Remove(stack.Log(name))
	f, err := stack.StartNamedFluxd(ctx, name, filepath.Join(binDir, "fluxd"), instance, nil, append([]string{"--git-path=ssh"}, args...)...)
	if err == nil {
		t.Fatalf("fluxd %s started (pid %d); want it refused", name, f.PID)
	}
	log := readTrimmed(t, stack.Log(name))
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("fluxd's log does not say %q:\n%s", w, log)
		}
	}
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
