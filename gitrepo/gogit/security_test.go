package gogit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

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
