package gogit

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
)

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
