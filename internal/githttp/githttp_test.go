package githttp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// git runs the git CLI, an independent client, in dir.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	// git runs git-remote-http as a child, which keeps the output open
	// after ctx kills git: stop waiting for it a moment later.
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

// newRemote is a bare repository with one commit that accepts pushes over
// HTTP, and a clone of it made over opts' server.
func newRemote(t *testing.T, opts Options) (r *Remote, bare, clone string) {
	t.Helper()
	dir := t.TempDir()
	bare = filepath.Join(dir, "remote.git")
	mustGit(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	mustGit(t, bare, "config", "http.receivepack", "true")
	seed := filepath.Join(dir, "seed")
	mustGit(t, dir, "init", "-q", "-b", "main", seed)
	mustGit(t, seed, "commit", "-q", "--allow-empty", "-m", "seed")
	mustGit(t, seed, "push", "-q", bare, "main")
	r = Serve(t, filepath.Dir(bare), opts)
	clone = filepath.Join(dir, "clone")
	url := r.RepoURL(bare)
	if opts.Password != "" {
		url = strings.Replace(url, "http://", "http://"+opts.User+":"+opts.Password+"@", 1)
	}
	mustGit(t, dir, "clone", "-q", url, clone)
	return r, bare, clone
}

// push commits msg in clone and pushes it; it returns the commit and the
// push's error.
func push(t *testing.T, clone, msg string) (string, error) {
	t.Helper()
	mustGit(t, clone, "commit", "-q", "--allow-empty", "-m", msg)
	head := mustGit(t, clone, "rev-parse", "HEAD")
	out, err := git(context.Background(), clone, "push", "-q", "origin", "main")
	if err != nil {
		t.Logf("push %q: %v\n%s", msg, err, out)
	}
	return head, err
}

// Each fault does to a push what it says, once, as the git CLI and the
// bare repository see it.
func TestFaults(t *testing.T) {
	r, bare, clone := newRemote(t, Options{})
	head := func() string { return mustGit(t, bare, "rev-parse", "main") }

	c, err := push(t, clone, "plain")
	if err != nil || head() != c {
		t.Fatalf("a plain push: %v, remote at %s; want %s", err, head(), c)
	}

	r.Refuse.Store(true)
	before := head()
	if _, err := push(t, clone, "refused"); err == nil || head() != before {
		t.Errorf("a refused push: %v, remote at %s; want an error and the remote at %s", err, head(), before)
	}
	if c, err := push(t, clone, "after the refusal"); err != nil || head() != c {
		t.Errorf("the push after a refusal: %v; want it through (a refusal is once)", err)
	}

	r.LoseReply.Store(true)
	if c, err := push(t, clone, "reply lost"); err == nil || head() != c {
		t.Errorf("a push whose reply is lost: %v, remote at %s; want an error and the commit %s landed", err, head(), c)
	}
	mustGit(t, clone, "fetch", "-q")

	calls := 0
	f := func() { calls++ }
	r.Interpose.Store(&f)
	if _, err := push(t, clone, "interposed"); err != nil || calls != 1 {
		t.Errorf("the push after Interpose: %v, interposed %d times; want once", err, calls)
	}
	if _, err := push(t, clone, "next"); err != nil || calls != 1 {
		t.Errorf("the push after that: %v, interposed %d times; want still once", err, calls)
	}

	r.Stalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = git(ctx, clone, "ls-remote", "origin")
	cancel()
	if ctx.Err() == nil {
		t.Errorf("ls-remote while stalled ended by itself (%v); want it to hang until the client gives up", err)
	}
	r.Reset()
	if _, err := git(context.Background(), clone, "ls-remote", "origin"); err != nil {
		t.Errorf("ls-remote after Reset: %v", err)
	}
}

// With a password, a client without it is refused with a challenge; with
// it, it clones and pushes.
func TestBasicAuth(t *testing.T) {
	r, bare, clone := newRemote(t, Options{User: "fluxd", Password: "s3cret"})
	if c, err := push(t, clone, "with credentials"); err != nil || mustGit(t, bare, "rev-parse", "main") != c {
		t.Errorf("a push with credentials: %v", err)
	}
	out, err := git(context.Background(), t.TempDir(), "ls-remote", r.RepoURL(bare))
	if err == nil || !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
		t.Errorf("ls-remote without credentials: %v\n%s; want it refused", err, out)
	}
}
