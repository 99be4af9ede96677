package localstack

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluxd/fluxd/internal/sshserver"
)

// GitSSH is an OpenSSH server the stack started, serving its git
// repositories over SSH.
type GitSSH struct {
	*sshserver.Server
	// GitURL is the ssh:// URL of the stack's manifests repository (the
	// same bare repository as GitURL's file://).
	GitURL string
	// Log is the path of its log file.
	Log string
}

// StartGitSSH starts, on demand, Debian's sshd (openssh-server, see
// hack/deps.sh) on a loopback port, serving the stack's repositories to
// the keys it is told to Authorize, each of which may run git-shell only.
// Its host key, config and authorized keys are under the stack's
// directory, and KnownHostsFile holds its host key as ssh-keyscan reads
// it. It stops with the stack. sshd needs root (see package sshserver).
func (s *Stack) StartGitSSH(ctx context.Context) (*GitSSH, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name := "sshd-" + strconv.Itoa(port)
	srv, err := sshserver.Prepare(ctx, filepath.Join(s.Dir, name))
	if err != nil {
		return nil, err
	}
	path, args := srv.Command()
	p, err := s.spawn(name, path, args...)
	if err != nil {
		return nil, err
	}
	if err := srv.Ready(ctx, 20*time.Second); err != nil {
		if died := p.died(); died != nil {
			return nil, died
		}
		return nil, err
	}
	s.logf("%-34s ready on %s", "git over ssh", srv.Addr)
	return &GitSSH{Server: srv, GitURL: srv.URL(strings.TrimPrefix(s.GitURL, "file://")), Log: p.logPath}, nil
}
