package release

import (
	"context"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// A user in git's own form ("Name <email>", Flux v1's fluxctl default)
// authors the commit as that name and address.
func TestExecuteAuthorInGitForm(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	if _, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, AllLatest: true, User: "Jane Doe <jane@example.com>"}, history.Release, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if repo.author.Name != "Jane Doe" || repo.author.Email != "jane@example.com" {
		t.Errorf("author = %+v; want Jane Doe <jane@example.com>", repo.author)
	}
}
