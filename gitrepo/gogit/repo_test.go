package gogit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
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

func TestCommitAndPushLandsOneCommit(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != base {
		t.Fatalf("Sync = %s, remote prod = %s", base, got)
	}
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release a:2", gitrepo.Signature{Name: "alice", Email: "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Fatalf("remote prod = %s, want the pushed commit %s", got, commit)
	}
	if got := gitCLI(t, bare, "rev-list", "--count", base+".."+commit); got != "1" {
		t.Errorf("%s commits pushed, want 1", got)
	}
	if got := gitCLI(t, bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", "prod"); got != "alice <alice@example.com>|fluxd <fluxd@example.com>|Release a:2" {
		t.Errorf("commit = %q", got)
	}
	if got := gitCLI(t, bare, "show", "prod:deploy/app.yaml"); got != "image: a:2" {
		t.Errorf("file in remote = %q", got)
	}
}

func TestCommitAndPushRefusesAMovedBranch(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else pushes.
	theirs := pushFromAnotherClient(t, bare)

	_, err = commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release", gitrepo.Signature{})
	if fluxerr.KindOf(err) != fluxerr.Precondition {
		t.Fatalf("err = %v; want a Precondition error", err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != theirs {
		t.Errorf("remote moved to %s; want it left at %s", got, theirs)
	}
}

func TestPushFailureLeavesNothingBehind(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A pre-receive hook that refuses every push: a remote that cannot be
	// written to.
	hook := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release", gitrepo.Signature{})
	if err == nil {
		t.Skip("go-git's in-process file transport does not run hooks; the refusal is tested over smart HTTP in e2e")
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != base {
		t.Errorf("remote moved to %s", got)
	}
	head, _ := r.Head()
	if head != base {
		t.Errorf("local clone kept the unpushed commit: head %s, want %s", head, base)
	}
	b, _ := os.ReadFile(filepath.Join(r.Dir(), "deploy", "app.yaml"))
	if string(b) != "image: a:1\n" {
		t.Errorf("local file kept the edit: %q", b)
	}
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

func TestPushAfterSomeoneElsePushedIsRefusedNotForced(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := r.Commit(ctx, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release", gitrepo.Signature{})
	if err != nil {
		t.Fatal(err)
	}
	// Another client pushes between fluxd's commit and its push.
	theirs := pushFromAnotherClient(t, bare)

	err = r.Push(ctx, commit)
	if !errors.Is(err, gitrepo.ErrMoved) {
		t.Fatalf("Push = %v; want an error wrapping gitrepo.ErrMoved", err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != theirs {
		t.Errorf("remote prod = %s; the other client's commit %s was lost", got, theirs)
	}
}

// A fluxd taking a job over finds the commit the job pushed by its
// trailer, among commits pushed after it by others; a job that pushed
// nothing is not found.
func TestFindCommitByTrailer(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release a:2\n\nFluxd-Job: j1\n", gitrepo.Signature{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	pushFromAnotherClient(t, bare)
	if _, err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := r.FindCommit(ctx, "Fluxd-Job: j1", 10); err != nil || got != commit {
		t.Errorf("FindCommit(j1) = %q, %v; want %s", got, err, commit)
	}
	if got, err := r.FindCommit(ctx, "Fluxd-Job: j2", 10); err != nil || got != "" {
		t.Errorf("FindCommit(j2) = %q, %v; want none", got, err)
	}
	// Only whole lines count: a message that mentions the trailer inline
	// is not the job's commit.
	if got, _ := r.FindCommit(ctx, "Fluxd-Job:", 10); got != "" {
		t.Errorf("a partial line matched %s", got)
	}
}
