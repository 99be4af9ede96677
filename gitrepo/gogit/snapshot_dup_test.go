package gogit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A tree holding two entries of one name, a symbolic link "deploy" to a
// directory outside and a directory "deploy", is not written through
// the link: the snapshot fails, and nothing lands outside it.
func TestSnapshotNeverWritesThroughALinkOfADuplicateName(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	if _, err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	work := filepath.Join(t.TempDir(), "evil")
	gitCLI(t, "", "clone", "-q", "-b", "prod", bare, work)
	hashOf := func(body string) string {
		p := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return gitCLI(t, work, "hash-object", "-w", p)
	}
	file := hashOf("kind: Deployment\n")
	link := hashOf(outside)
	sub := gitCLIStdin(t, work, "100644 blob "+file+"\tevil.yaml\n", "mktree")
	top := gitCLIStdin(t, work, "120000 blob "+link+"\tdeploy\n040000 tree "+sub+"\tdeploy\n", "mktree")
	commit := gitCLI(t, work, "commit-tree", top, "-m", "two entries named deploy")
	gitCLI(t, work, "push", "-q", "-f", "origin", commit+":refs/heads/prod")

	// The working clone's reset refuses such a tree; its objects are
	// fetched, and a snapshot of it is what is asked for here.
	if _, err := r.Sync(ctx); err != nil {
		t.Logf("Sync: %v", err)
	}
	_, done, err := r.Snapshot(ctx, commit)
	if err == nil {
		done()
	}
	if _, serr := os.Stat(filepath.Join(outside, "evil.yaml")); serr == nil {
		t.Fatalf("the snapshot wrote evil.yaml through the link, outside it (err %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "deploy") {
		t.Errorf("a tree with two entries named deploy: err = %v, want a refusal naming it", err)
	}
}

// gitCLIStdin runs git with stdin.
func gitCLIStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
