package gogit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/githttp"
)

// git runs the git CLI: a second, independent client of the same remote.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRemote makes a bare repository with deploy/app.yaml on branch prod.
func newRemote(t testing.TB) (url, bare string) {
	t.Helper()
	dir := t.TempDir()
	bare = filepath.Join(dir, "remote.git")
	work := filepath.Join(dir, "seed")
	gitCLI(t, dir, "init", "-q", "--bare", "-b", "prod", bare)
	gitCLI(t, dir, "init", "-q", "-b", "prod", work)
	if err := os.MkdirAll(filepath.Join(work, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "deploy", "app.yaml"), []byte("image: a:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "seed")
	gitCLI(t, work, "push", "-q", bare, "prod")
	return "file://" + bare, bare
}

// pushFromAnotherClient pushes a commit to bare's prod branch with the git
// CLI, as someone else would, and returns it.
func pushFromAnotherClient(t *testing.T, bare string) string {
	t.Helper()
	other := filepath.Join(t.TempDir(), "other")
	gitCLI(t, "", "clone", "-q", "-b", "prod", bare, other)
	if err := os.WriteFile(filepath.Join(other, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, other, "add", ".")
	gitCLI(t, other, "commit", "-q", "-m", "other")
	gitCLI(t, other, "push", "-q", "origin", "prod")
	return gitCLI(t, bare, "rev-parse", "prod")
}

// commitAndPush is what a release does: Commit, then Push.
func commitAndPush(ctx context.Context, r *Repo, base string, files map[string][]byte, message string, author gitrepo.Signature) (string, error) {
	commit, err := r.Commit(ctx, base, files, message, author)
	if err != nil {
		return "", err
	}
	return commit, r.Push(ctx, commit)
}

func open(t testing.TB, url string) *Repo {
	t.Helper()
	r, err := Open(context.Background(), Config{URL: url, Branch: "prod", Paths: []string{"deploy"}, User: "fluxd", Email: "fluxd@example.com", Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUnreachableRemoteIsExplained(t *testing.T) {
	_, err := Open(context.Background(), Config{URL: "file:///nonexistent/repo.git", Branch: "main", User: "f", Email: "f@f", Dir: filepath.Join(t.TempDir(), "c")})
	if err == nil || fluxerr.KindOf(err) != fluxerr.Unavailable || !strings.Contains(err.Error(), "cloning file:///nonexistent/repo.git") {
		t.Fatalf("err = %v", err)
	}
	url, _ := newRemote(t)
	_, err = Open(context.Background(), Config{URL: url, Branch: "nope", User: "f", Email: "f@f", Dir: filepath.Join(t.TempDir(), "c")})
	if err == nil || !strings.Contains(err.Error(), "branch") {
		t.Fatalf("missing branch: %v", err)
	}
	_, err = Open(context.Background(), Config{URL: url, Branch: "prod", Paths: []string{"nothere"}, User: "f", Email: "f@f", Dir: filepath.Join(t.TempDir(), "c")})
	if err == nil || !strings.Contains(err.Error(), `git path "nothere"`) {
		t.Fatalf("missing path: %v", err)
	}
}

// A malformed --git-url never shows its credentials: not in Redact, not
// in Config.Validate's error (url.Parse and transport.NewEndpoint quote
// the URL, or parts of it, in theirs).
func TestMalformedURLsNeverShowCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, secret string }{
		{"https://user:pa ss@host/x", "pa ss"},
		{"https://user:secret@[::1", "secret"},
		{"https://user:secret@host:99999999/x", "secret"},
		{"https://user:secret", "secret"},              // the "port" is the password
		{"https://user:sec%zzret@host/x", "sec%zzret"}, // a bad escape in the password
		{"https://tok\x7fen@host/x", "tok\x7fen"},      // a control character in a lone token
		{"https://user:p@ss w@host/x", "p@ss w"},
		{"user:secret@host:path", "secret"},
		{"https://user:s3cret@git.example/r.git", "s3cret"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			if got := Redact(tc.url); strings.Contains(got, tc.secret) {
				t.Errorf("Redact(%q) = %q", tc.url, got)
			}
			err := Config{URL: tc.url, Branch: "main", User: "f", Email: "f@f", Dir: "/tmp/x"}.Validate()
			if err != nil && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("Validate: %v", err)
			}
			if _, err := Open(context.Background(), Config{URL: tc.url, Branch: "main", User: "f", Email: "f@f", Dir: filepath.Join(t.TempDir(), "c"), Timeout: 1}); err == nil {
				t.Errorf("Open(%q) succeeded", tc.url)
			} else if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("Open: %v", err)
			}
		})
	}
}

func TestSmartHTTPWithCredentials(t *testing.T) {
	_, bare := newRemote(t)
	// http-backend refuses pushes unless receive-pack is enabled.
	gitCLI(t, bare, "config", "http.receivepack", "true")
	srv := githttp.Serve(t, filepath.Dir(bare), githttp.Options{User: "fluxd", Password: "s3cret-token"})
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	r, err := Open(ctx, Config{URL: "http://fluxd:s3cret-token@" + host + "/remote.git", Branch: "prod", Paths: []string{"deploy"}, User: "fluxd", Email: "f@f", Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:3\n")}, "Release a:3", gitrepo.Signature{Name: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Fatalf("remote prod = %s, want %s pushed over smart HTTP", got, commit)
	}

	// A wrong token: refused, explained, and the token is not shown.
	_, err = Open(ctx, Config{URL: "http://fluxd:wrong-token@" + host + "/remote.git", Branch: "prod", User: "fluxd", Email: "f@f", Dir: filepath.Join(t.TempDir(), "clone2")})
	if err == nil {
		t.Fatal("clone with a wrong token succeeded")
	}
	if strings.Contains(err.Error(), "wrong-token") || !strings.Contains(err.Error(), "refused fluxd's credentials") || !strings.Contains(err.Error(), "redacted") {
		t.Errorf("wrong-token error:\n%v", err)
	}
}
