package gogit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// silentSSH accepts TCP connections and never says a word: an SSH remote
// behind a half-dead load balancer, or a firewall that accepts and drops.
func silentSSH(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// An SSH remote that accepts the connection and never answers fails the
// clone at --git-timeout (four times it, for a clone) with an error that
// says the remote did not answer, instead of holding fluxd forever: go-git
// bounds only the TCP dial.
func TestSSHRemoteThatNeverAnswersTimesOut(t *testing.T) {
	addr := silentSSH(t)
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sshConfig("ssh://git@"+addr+"/srv/git/remote.git", dir, known)
	cfg.Timeout = 250 * time.Millisecond
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Clone(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	// What readiness reads to tell a stuck operation from a slow one.
	if st := r.Status(); st.Waiting != "cloning" || st.WaitingFor != 4*cfg.Timeout {
		t.Errorf("status while the clone waits = %+v; want cloning, bounded by 4 × --git-timeout", st)
	}
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		// Not a timing assertion: a guard so that the bug shows as a
		// failure rather than a test binary killed at its own timeout.
		t.Fatal("the clone from a remote that never answers did not end")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("clone from a silent remote: %v; want the git timeout", err)
	}
	var fe *fluxerr.Error
	if !errors.As(err, &fe) || !strings.Contains(fe.Help, "--git-timeout") {
		t.Errorf("the error does not explain itself: %v (help %q)", err, fe.Help)
	}
	t.Logf("error: %v\nhelp: %s", err, fe.Help)
}
