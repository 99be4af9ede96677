package release

import (
	"context"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// readLocked reads the workload definitions under the git lock (after a
// fetch when fetch is set), and releases it.
func (e *Engine) readLocked(ctx context.Context, fetch bool) (string, *gitrepo.Manifests, error) {
	if err := e.lockGit(ctx); err != nil {
		return "", nil, err
	}
	defer e.unlockGit()
	return e.readManifests(ctx, fetch)
}

// Sync fetches the remote and resets the clone to it, under the git lock,
// so that a poll never resets the working tree under a plan or release
// reading it.
func (e *Engine) Sync(ctx context.Context) (string, error) {
	if err := e.lockGit(ctx); err != nil {
		return "", err
	}
	defer e.unlockGit()
	return e.fetch(ctx)
}

// Manifests syncs the clone and returns its workload definitions.
func (e *Engine) Manifests(ctx context.Context) (string, *gitrepo.Manifests, error) {
	if err := e.lockGit(ctx); err != nil {
		return "", nil, err
	}
	defer e.unlockGit()
	return e.manifests(ctx)
}

func (e *Engine) manifests(ctx context.Context) (string, *gitrepo.Manifests, error) {
	return e.readManifests(ctx, true)
}

// readManifests reads the workload definitions, after fetching the
// remote when fetch is set (or nothing was fetched yet).
func (e *Engine) readManifests(ctx context.Context, fetch bool) (string, *gitrepo.Manifests, error) {
	rev := e.lastRev
	if fetch || rev == "" {
		var err error
		if rev, err = e.fetch(ctx); err != nil {
			return "", nil, err
		}
	}
	_, snap := e.repo.(Snapshotter)
	paths := strings.Join(e.repo.Paths(), "\x00")
	if p := e.parsed; snap && rev != "" && p.rev == rev && p.paths == paths {
		return rev, p.m, nil
	}
	var m *gitrepo.Manifests
	err := e.readTree(ctx, rev, func(root string) error {
		dirs, err := gitrepo.ResolvePaths(root, e.repo.Paths())
		if err != nil {
			return fluxerr.New(fluxerr.User, err, "")
		}
		m, err = gitrepo.FindWorkloads(root, dirs)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	for _, p := range m.Problems {
		e.log.Warn("skipping a manifest", "problem", p.Error())
	}
	if snap && rev != "" {
		e.parsed = parsedRevision{rev: rev, paths: paths, m: m}
	}
	return rev, m, nil
}
