package gogit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/giturl"
	"github.com/fluxd/fluxd/internal/sshserver"
)

// startSSHD runs Debian's sshd on loopback for the test, serving
// git-shell, and returns it.
func startSSHD(t *testing.T) *sshserver.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts sshd")
	}
	if os.Geteuid() != 0 {
		t.Skip("sshd serves git over SSH only when run as root")
	}
	ctx := context.Background()
	srv, err := sshserver.Prepare(ctx, filepath.Join(t.TempDir(), "sshd"))
	if err != nil {
		t.Fatal(err)
	}
	path, args := srv.Command()
	cmd := exec.Command(path, args...)
	var log strings.Builder
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := srv.Ready(ctx, 10*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	return srv
}

// sshConfig is a Config for the test's OpenSSH server. Its --git-timeout
// is 30 s: 10 s ran out on a fetch over a loaded CI machine (the
// handshake and the fetch each a new ssh process), and no test here
// judges that timeout but the one that sets its own.
func sshConfig(url, dir, knownHosts string) Config {
	return Config{URL: url, Branch: "prod", Paths: []string{"deploy"}, User: "fluxd", Email: "fluxd@example.com",
		Dir: filepath.Join(dir, "clone"), Timeout: 30 * time.Second,
		SSHKeyFile: filepath.Join(dir, "ssh", "identity"), GenerateSSHKey: true, KnownHostsFile: knownHosts}
}

// With no key, fluxd makes one and keeps it: the server refuses it until
// it is authorized, and the refusal names the public key to add; once it
// is, fluxd clones and pushes, which the git CLI sees in the remote.
func TestSSHGeneratedKeyClonesAndPushesOnceAuthorized(t *testing.T) {
	srv := startSSHD(t)
	_, bare := newRemote(t)
	dir := t.TempDir()
	cfg := sshConfig(srv.URL(bare), dir, srv.KnownHostsFile())
	ctx := context.Background()

	_, err := Open(ctx, cfg)
	var refused *KeyRefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Open with a key the server does not know: %v, want a KeyRefusedError", err)
	}
	t.Logf("refused key:\n%v", err)
	pub, rerr := os.ReadFile(cfg.SSHKeyFile + ".pub")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(err.Error(), strings.TrimSpace(string(pub))) || !strings.Contains(err.Error(), "deploy key") {
		t.Errorf("the refusal does not name the public key to add as a deploy key:\n%v", err)
	}
	if fi, err := os.Stat(cfg.SSHKeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the generated key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}

	if err := srv.Authorize(string(pub)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, cfg) // the same key, kept
	if err != nil {
		t.Fatal(err)
	}
	key, ok := r.DeployKey()
	if !ok || key.PublicKey != strings.TrimSpace(string(pub)) || !strings.HasPrefix(key.Fingerprint, "SHA256:") {
		t.Errorf("DeployKey() = %+v, %v; want the key in %s.pub", key, ok, cfg.SSHKeyFile)
	}
	head, _ := r.Head()
	commit, err := commitAndPush(ctx, r, head, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release a:2", gitrepo.Signature{})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Errorf("the remote's prod is %s, want the pushed %s", got, commit)
	}
}

// A host whose key the known hosts file does not list is refused, with
// the fingerprint of the key it presented; one whose key differs from
// the listed one is refused as a mismatch.
func TestSSHRefusesUnknownAndChangedHostKeys(t *testing.T) {
	srv := startSSHD(t)
	_, bare := newRemote(t)
	hostPub, err := os.ReadFile(filepath.Join(srv.Dir, "ssh_host_ed25519_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "known_hosts_empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := LoadKey(filepath.Join(dir, "other"), true)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, "known_hosts_changed")
	line := "[127.0.0.1]:" + strings.Split(srv.Addr, ":")[1] + " " + string(ssh.MarshalAuthorizedKey(other.PublicKey()))
	if err := os.WriteFile(changed, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err = Open(context.Background(), sshConfig(srv.URL(bare), dir, empty))
	var unknown *UnknownHostError
	if !errors.As(err, &unknown) {
		t.Fatalf("Open with an empty known hosts file: %v, want an UnknownHostError", err)
	}
	t.Logf("unknown host:\n%v", err)
	for _, want := range []string{ssh.FingerprintSHA256(hostKey), "ssh-keyscan -p", empty} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}

	_, err = Open(context.Background(), sshConfig(srv.URL(bare), dir, changed))
	var mismatch *HostKeyMismatchError
	if !errors.As(err, &mismatch) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(hostKey)) {
		t.Fatalf("Open with another key listed for the host: %v, want a HostKeyMismatchError with the presented fingerprint", err)
	}
}

func TestSSHConfigNeedsAKnownHostsFile(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"ssh://git@example.com:2222/r.git", "git@example.com:org/r.git"} {
		cfg := Config{URL: url, Branch: "main", User: "f", Email: "f@f", Dir: "/tmp/x", SSHKeyFile: "/tmp/k"}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "--git-ssh-known-hosts-file is required") {
			t.Errorf("%s without known hosts: %v", url, err)
		}
	}
}

// A generated key is kept: loading it again gives the same key.
func TestLoadKeyKeepsTheGeneratedKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ssh", "identity")
	a, err := LoadKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadKey(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if ssh.FingerprintSHA256(a.PublicKey()) != ssh.FingerprintSHA256(b.PublicKey()) || a.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("loaded %s %s, generated %s", b.PublicKey().Type(), ssh.FingerprintSHA256(b.PublicKey()), ssh.FingerprintSHA256(a.PublicKey()))
	}
	if _, err := LoadKey(filepath.Join(t.TempDir(), "missing"), false); err == nil {
		t.Error("a missing --git-ssh-key-file was not an error")
	}
}

// writeConfigMapMount lays out dir as the kubelet mounts a ConfigMap: the
// file is a link through ..data to a timestamped directory, and an update
// swaps ..data in one rename.
func writeConfigMapMount(t *testing.T, dir, version string, content []byte) {
	t.Helper()
	ts := filepath.Join(dir, "..ts_"+version)
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "known_hosts"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink("..ts_"+version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "known_hosts")); err != nil {
		if err := os.Symlink(filepath.Join("..data", "known_hosts"), filepath.Join(dir, "known_hosts")); err != nil {
			t.Fatal(err)
		}
	}
}

// A host key added to the known hosts file while fluxd runs is used on
// the next attempt, with no restart, when the file is a ConfigMap's mount
// that the kubelet updates by swapping a link; the refusal before says to
// update the ConfigMap, not to append to the read-only file.
func TestSSHKnownHostsReloadedWhenTheConfigMapChanges(t *testing.T) {
	srv := startSSHD(t)
	_, bare := newRemote(t)
	dir := t.TempDir()
	mount := filepath.Join(dir, "known_hosts_mount")
	writeConfigMapMount(t, mount, "1", nil)
	cfg := sshConfig(srv.URL(bare), dir, filepath.Join(mount, "known_hosts"))
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := r.DeployKey()
	if err := srv.Authorize(key.PublicKey); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = r.Clone(ctx)
	var unknown *UnknownHostError
	if !errors.As(err, &unknown) {
		t.Fatalf("Clone with no host key listed: %v, want an UnknownHostError", err)
	}
	var fe *fluxerr.Error
	if !errors.As(err, &fe) || !strings.Contains(fe.Help, "kubectl -n NAMESPACE create configmap fluxd-known-hosts") || strings.Contains(fe.Help, ">> "+cfg.KnownHostsFile) {
		t.Errorf("the help for a ConfigMap mount does not say to update the ConfigMap:\n%s", fe.Help)
	}
	t.Logf("help: %s", fe.Help)

	hosts, err := os.ReadFile(srv.KnownHostsFile())
	if err != nil {
		t.Fatal(err)
	}
	writeConfigMapMount(t, mount, "2", hosts)
	if err := r.Clone(ctx); err != nil {
		t.Fatalf("Clone after the host key was added to the mounted file: %v", err)
	}
}

// fluxd's IsSSH (which 'fluxctl install' shares, through giturl) agrees
// with go-git's own parser, which is what reaches the remote, on every URL
// of the table, and the table says what git says.
func TestIsSSHAgreesWithGoGit(t *testing.T) {
	t.Parallel()
	for url, want := range giturl.Cases {
		ep, err := transport.NewEndpoint(url)
		goGit := err == nil && ep.Protocol == "ssh"
		if goGit != want {
			t.Errorf("go-git reads %q as SSH: %v; the table says %v", url, goGit, want)
		}
		if got := IsSSH(url); got != goGit {
			t.Errorf("IsSSH(%q) = %v; go-git's parser says %v", url, got, goGit)
		}
	}
}
