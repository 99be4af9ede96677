package gogit

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/fluxd/fluxd/internal/giturl"
)

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
