package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// The manifests in git, as listing calls see them. A read fetches the
// remote, and a remote may stall: listing calls must keep answering from
// the last good copy meanwhile. So a stale copy is refreshed in the
// background, one read at a time, and a caller waits for it only briefly
// (staleWait) before answering from the copy it has; the remote's state
// (RemoteStatus) says how stale that is.

// staleWait is how long a listing call waits for a refresh of a stale copy
// of the manifests before answering from that copy.
var staleWait = 500 * time.Millisecond

// refreshTimeout bounds a background read (the git lock's wait included).
var refreshTimeout = 2 * time.Minute

// readManifests returns the workload definitions in git, fetching at most
// once per cfg.GitRefresh. With a copy at hand it waits at most staleWait
// for a fetch; without one, as long as ctx allows.
func (d *Daemon) readManifests(ctx context.Context) (*gitrepo.Manifests, error) {
	d.mu.Lock()
	m := d.manifests
	if m != nil && time.Since(d.readAt) < d.cfg.GitRefresh {
		d.mu.Unlock()
		return m, nil
	}
	done := d.refreshLocked()
	waited := time.Since(d.refreshSince)
	d.mu.Unlock()
	if m != nil && waited >= staleWait {
		// A read has been waiting on the remote for a while already:
		// answer at once from the copy.
		return m, nil
	}
	var timeout <-chan time.Time
	if m != nil {
		t := time.NewTimer(staleWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
	case <-timeout:
		return m, nil
	case <-ctx.Done():
		if m != nil {
			return m, nil
		}
		return nil, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.manifests == nil {
		if d.readErr == nil {
			return nil, fluxerr.New(fluxerr.Unavailable, errors.New("git has not been read yet"), "fluxd reads the manifests in the background; try again in a moment.")
		}
		return nil, d.readErr
	}
	return d.manifests, nil
}

// refreshLocked starts a background read unless one runs, and returns a
// channel closed when it ends. d.mu must be held.
func (d *Daemon) refreshLocked() <-chan struct{} {
	if d.refreshing != nil {
		return d.refreshing
	}
	done := make(chan struct{})
	d.refreshing, d.refreshSince = done, time.Now()
	gen, moved := d.gen, d.moved
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		rev, m, err := d.deps.Releaser.Manifests(ctx)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.refreshing, d.readErr = nil, err
		defer func() { // before the unlock
			if d.moved != moved {
				// git moved while this read ran: what it found may be
				// the revision before. It answers until the next read,
				// which starts now.
				d.readAt = time.Time{}
				d.refreshLocked()
			}
		}()
		if err != nil {
			d.log.Warn("reading the manifests failed; answering from the last copy", "error", err)
			return
		}
		if d.gen != gen {
			return // a read that began later stored a newer copy meanwhile
		}
		d.keepManifests(rev, m)
	}()
	return done
}

// keepManifests keeps m, read from revision rev. The same revision read
// again gives the same manifests: the copy already kept stays, so that
// what was built from it (the view of services, its kept answers) stays
// valid. Each read of 10,000 workloads' files otherwise made a new copy,
// and the view was rebuilt for it. Called with d.mu held.
func (d *Daemon) keepManifests(rev string, m *gitrepo.Manifests) {
	if d.manifests != nil && rev != "" && rev == d.manifestsRev {
		m = d.manifests
	}
	d.manifests, d.manifestsRev, d.readAt, d.gen = m, rev, time.Now(), d.gen+1
}

// readManifestsNow fetches and reads the manifests now, waiting as long as
// ctx allows: for a command that names something the copy lacks, which
// may have been pushed a moment ago.
func (d *Daemon) readManifestsNow(ctx context.Context) (*gitrepo.Manifests, error) {
	rev, m, err := d.deps.Releaser.Manifests(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.readErr = nil
	d.keepManifests(rev, m)
	m = d.manifests
	d.mu.Unlock()
	return m, nil
}

// GitMoved tells the daemon that git has a new revision (a push of
// fluxd's own, an automated release's included, or a fetch): it reads git
// again at once, in the background, so that listings never show the
// revision before as "git says". A read already under way may have begun
// before the push: another read follows it at once.
func (d *Daemon) GitMoved(string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readAt = time.Time{}
	d.moved++
	if d.refreshing == nil {
		d.refreshLocked()
	}
}

// invalidate makes the next listing call read git again (it keeps the
// copy to answer from if the remote stalls).
func (d *Daemon) invalidate() {
	d.mu.Lock()
	d.readAt = time.Time{}
	d.mu.Unlock()
}

// gitStatus is the remote's state, when the releaser reports it.
func (d *Daemon) gitStatus() (gitrepo.RemoteStatus, bool) {
	if d.deps.Git == nil {
		return gitrepo.RemoteStatus{}, false
	}
	return d.deps.Git.Status(), true
}

// DeployKey is the public half of the SSH key fluxd reaches its git
// remote with; false when it reaches it without one.
func (d *Daemon) DeployKey() (gitrepo.DeployKey, bool) {
	if d.deps.SSHKey == nil {
		return gitrepo.DeployKey{}, false
	}
	return d.deps.SSHKey.DeployKey()
}
