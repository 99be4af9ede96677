package gogit

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// A repository made with New before its key is authorized reports why it
// cannot be read (the refused key, to add as a deploy key) and keeps
// trying; once the key is authorized, KeepCloning clones without a new
// Repo, and a call that hit the refusal made it try at once rather than
// after its backoff. The key is given as PEM, as one read from a
// Kubernetes Secret is.
func TestKeepCloningUntilTheKeyIsAuthorized(t *testing.T) {
	srv := startSSHD(t)
	_, bare := newRemote(t)
	dir := t.TempDir()
	cfg := sshConfig(srv.URL(bare), dir, srv.KnownHostsFile())
	pemKey, err := GenerateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	cfg.SSHKeyFile, cfg.GenerateSSHKey = "", false
	cfg.SSHKey, cfg.SSHKeySource = pemKey, "the Secret fluxd/fluxd-ssh"

	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := r.DeployKey()
	if !ok || !strings.HasPrefix(key.PublicKey, "ssh-ed25519 ") {
		t.Fatalf("DeployKey() before any clone = %+v, %v; want the key", key, ok)
	}
	if st := r.Status(); !st.NotCloned {
		t.Errorf("Status() before a clone = %+v, want NotCloned", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failures atomic.Int32
	refused := make(chan struct{}, 1)
	done := make(chan error, 1)
	// A long backoff: only a poke makes the second attempt come soon.
	b := wait.Backoff{Duration: time.Hour, Factor: 2, Steps: math.MaxInt32, Cap: time.Hour}
	go func() {
		done <- r.KeepCloning(ctx, b, func(err error, next time.Duration) {
			failures.Add(1)
			select {
			case refused <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-refused:
	case err := <-done:
		t.Fatalf("KeepCloning ended before the key was authorized: %v", err)
	}
	_, err = r.Sync(ctx)
	if fluxerr.KindOf(err) != fluxerr.Unavailable || !strings.Contains(err.Error(), "fluxd cannot read git yet") ||
		!strings.Contains(err.Error(), key.PublicKey) || !strings.Contains(err.Error(), "the Secret fluxd/fluxd-ssh") {
		t.Errorf("Sync before the clone: %v\nwant an Unavailable saying git cannot be read yet, naming the key %s and where it is kept", err, key.PublicKey)
	}
	if st := r.Status(); !st.NotCloned || !strings.Contains(st.Error, "refused fluxd's key") {
		t.Errorf("Status() after a refusal = %+v, want NotCloned and the refusal", st)
	}

	if err := srv.Authorize(key.PublicKey); err != nil {
		t.Fatal(err)
	}
	// The poke: a call that needed the clone.
	_, _ = r.Sync(ctx)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("KeepCloning: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("KeepCloning did not clone within a minute of the key being authorized (its backoff is an hour)")
	}
	select {
	case <-r.Cloned():
	default:
		t.Error("Cloned() is not closed after a clone")
	}
	if st := r.Status(); st.NotCloned || st.Error != "" {
		t.Errorf("Status() after the clone = %+v", st)
	}
	head, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := commitAndPush(ctx, r, head, map[string][]byte{"deploy/app.yaml": []byte("image: a:3\n")}, "Release a:3", gitrepo.Signature{})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Errorf("the remote's prod is %s, want the pushed %s", got, commit)
	}
	if n := failures.Load(); n < 1 {
		t.Errorf("%d failures reported, want at least one", n)
	}
	if err := r.Clone(ctx); err != nil {
		t.Errorf("Clone after a clone: %v, want nothing done", err)
	}
}

// Calls that need git make KeepCloning try at once, but not back to back:
// twenty calls in a row while the remote fails start one early attempt,
// not twenty clones.
func TestCallsPokeTheCloneAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	cfg := Config{URL: "file://" + t.TempDir() + "/none.git", Branch: "prod", User: "f", Email: "f@f", Dir: t.TempDir() + "/clone"}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attempts := make(chan struct{}, 100)
	b := wait.Backoff{Duration: time.Hour, Factor: 2, Steps: math.MaxInt32, Cap: time.Hour}
	go func() {
		_ = r.KeepCloning(ctx, b, func(error, time.Duration) { attempts <- struct{}{} })
	}()
	<-attempts // the first attempt
	for range 20 {
		if _, err := r.Sync(ctx); err == nil {
			t.Fatal("Sync of a remote that does not exist succeeded")
		}
		// Time for a poked attempt to run before the next call.
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(attempts); n > 1 {
		t.Errorf("20 calls made %d clone attempts after the first; want at most 1 (pokes at most every %v)", n, PokeInterval)
	}
}
