package gogit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// Clone clones the remote into cfg.Dir, replacing whatever is there. Once
// it has succeeded it does nothing. A clone whose --git-path is missing
// counts as failed: the path may be pushed later.
func (r *Repo) Clone(ctx context.Context) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.repo != nil {
		return nil
	}
	err := r.clone(ctx)
	r.mu.Lock()
	r.cloneErr = err
	if fe := (*fluxerr.Error)(nil); errors.As(err, &fe) {
		// The explained error, which names the key to add, rather than
		// the transport's.
		r.status.Error = fe.Err.Error()
	}
	r.mu.Unlock()
	return err
}

func (r *Repo) clone(ctx context.Context) error {
	if err := os.RemoveAll(r.cfg.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(r.snapshotRoot()); err != nil {
		return err
	}
	var repo *git.Repository
	err := r.network(ctx, "cloning", 4, func(ctx context.Context, px transport.ProxyOptions) (err error) {
		repo, err = git.PlainCloneContext(ctx, r.cfg.Dir, false, &git.CloneOptions{
			URL:           r.cloneURL,
			Auth:          r.auth,
			ProxyOptions:  px,
			ReferenceName: plumbing.NewBranchReferenceName(r.cfg.Branch),
			SingleBranch:  true,
		})
		return err
	})
	if err != nil {
		return r.remoteError("cloning", err)
	}
	if _, err := gitrepo.ResolvePaths(r.cfg.Dir, r.cfg.Paths); err != nil {
		return fluxerr.New(fluxerr.User, err, "Push the path to the branch, or correct --git-path.")
	}
	r.repo = repo
	r.mu.Lock()
	if head, err := repo.Head(); err == nil {
		r.status.Revision = head.Hash().String()
	}
	r.status.NotCloned = false
	r.mu.Unlock()
	close(r.cloned)
	return nil
}

// Cloned is closed once the clone is made.
func (r *Repo) Cloned() <-chan struct{} { return r.cloned }

// KeepCloning calls Clone until it succeeds or ctx ends, waiting between
// attempts as b says (with b.Steps large and b.Cap set, the wait grows to
// the cap and stays there); a call that needed the clone makes it try at
// once. failed is told each failure and the wait before the next try.
func (r *Repo) KeepCloning(ctx context.Context, b wait.Backoff, failed func(err error, next time.Duration)) error {
	delay := b.DelayFunc()
	for {
		err := r.Clone(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next := delay()
		if failed != nil {
			failed(err, next)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-r.poke:
			t.Stop()
		}
	}
}

// notCloned is the error of an operation that needs the clone before it
// is made: why it is not (the last attempt's error and its help), and
// that fluxd keeps trying. It makes KeepCloning try again at once.
func (r *Repo) notCloned() error {
	if r.pokes.Allow() {
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
	r.mu.Lock()
	last := r.cloneErr
	r.mu.Unlock()
	const retrying = "fluxd keeps trying to clone by itself (and tries again at once after a call like this one); it needs no restart."
	if last == nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: it is still cloning %s (branch %s)", Redact(r.cfg.URL), r.cfg.Branch),
			"The first clone has not finished. Try again in a moment; "+retrying)
	}
	var fe *fluxerr.Error
	if errors.As(last, &fe) {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: %w", fe.Err), strings.TrimSpace(fe.Help+"\n"+retrying))
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: %w", last), retrying)
}
