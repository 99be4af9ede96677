package gogit

import (
	"context"
	"fmt"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Sync fetches the remote branch and resets the clone to it, returning
// the revision now checked out.
func (r *Repo) Sync(ctx context.Context) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	return r.sync(ctx)
}

func (r *Repo) sync(ctx context.Context) (string, error) {
	remoteRef := plumbing.NewRemoteReferenceName("origin", r.cfg.Branch)
	err := r.network(ctx, "fetching", 1, func(ctx context.Context, px transport.ProxyOptions) error {
		return r.repo.FetchContext(ctx, &git.FetchOptions{
			Auth:         r.auth,
			ProxyOptions: px,
			RefSpecs:     []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:%s", r.cfg.Branch, remoteRef))},
			Force:        true,
		})
	})
	if err != nil {
		return "", r.remoteError("fetching", err)
	}
	ref, err := r.repo.Reference(remoteRef, true)
	if err != nil {
		return "", r.remoteError("reading", err)
	}
	if err := r.resetTo(ref.Hash()); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.status.Revision = ref.Hash().String()
	r.mu.Unlock()
	return ref.Hash().String(), nil
}

func (r *Repo) resetTo(h plumbing.Hash) error {
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.Reset(&git.ResetOptions{Commit: h, Mode: git.HardReset}); err != nil {
		return fmt.Errorf("resetting the working clone to %s: %w", h, err)
	}
	return nil
}

// Head returns the revision checked out.
func (r *Repo) Head() (string, error) {
	if err := r.acquire(context.Background()); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	h, err := r.repo.Head()
	if err != nil {
		return "", err
	}
	return h.Hash().String(), nil
}
