package gogit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

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

// The author is one line of git's headers: a caller's newline or angle
// bracket in it would write headers of its choosing. Commit refuses it,
// and nothing reaches the remote.
func TestCommitRefusesAnAuthorThatWouldWriteHeaders(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, author := range []gitrepo.Signature{
		{Name: "mallory <m@x> 0 +0000\ncommitter forged"},
		{Name: "mallory\rx"},
		{Name: "mallory <evil@x>"},
		{Name: "mallory", Email: "m@x>\nparent 0000"},
		{Name: "tab\there"},
	} {
		_, err := r.Commit(ctx, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release", author)
		if fluxerr.KindOf(err) != fluxerr.User {
			t.Errorf("Commit by %q: %v; want a User error", author, err)
		}
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != base {
		t.Errorf("remote moved to %s", got)
	}
	// A plain name with spaces and non-ASCII letters is fine.
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:2\n")}, "Release", gitrepo.Signature{Name: "Zoë O'Brien"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "log", "-1", "--format=%an", commit); got != "Zoë O'Brien" {
		t.Errorf("author = %q", got)
	}
}

// A link in the repository (to /dev/zero, or out of the clone) is never
// written through.
func TestCommitRefusesToWriteThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside.yaml")
	if err := os.WriteFile(outside, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "remote.git")
	work := filepath.Join(dir, "seed")
	gitCLI(t, dir, "init", "-q", "--bare", "-b", "prod", bare)
	gitCLI(t, dir, "init", "-q", "-b", "prod", work)
	if err := os.MkdirAll(filepath.Join(work, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "deploy", "app.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(work, "linkdir")); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "seed")
	gitCLI(t, work, "push", "-q", bare, "prod")
	r := open(t, "file://"+bare)
	ctx := context.Background()
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"deploy/app.yaml", "linkdir/outside.yaml"} {
		_, err := r.Commit(ctx, base, map[string][]byte{file: []byte("image: evil\n")}, "Release", gitrepo.Signature{Name: "alice"})
		if fluxerr.KindOf(err) != fluxerr.User || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Commit %s: %v; want a refusal naming the link", file, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "untouched\n" {
		t.Errorf("the file outside the clone was written: %q", b)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != base {
		t.Errorf("remote moved to %s", got)
	}
}
