package gogit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
)

// Commit writes files (paths relative to the root) on top of the revision
// base and commits them locally as one commit authored by author. If base
// is no longer the remote's head, nothing is committed and the error is a
// Precondition. The commit reaches the remote only through Push; the next
// Sync discards a commit that was never pushed.
func (r *Repo) Commit(ctx context.Context, base string, files map[string][]byte, message string, author gitrepo.Signature) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	head, err := r.sync(ctx)
	if err != nil {
		return "", err
	}
	if head != base {
		return "", fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("%w: the branch %s moved from %.12s to %.12s while the release was being prepared", gitrepo.ErrMoved, r.cfg.Branch, base, head),
			"Someone pushed in the meantime. Plan the release again; it will be computed from the new revision.")
	}
	if author.Name == "" {
		author = gitrepo.Signature{Name: r.cfg.User, Email: r.cfg.Email}
	}
	if author.Email == "" {
		author.Email = r.cfg.Email
	}
	if err := author.Validate(); err != nil {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("committing: %w", err),
			"A commit's author is one line of git's headers: give a plain name, without newlines or angle brackets. Nothing was committed.")
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	undo := func() { _ = r.resetTo(plumbing.NewHash(head)) }
	for rel, content := range files {
		p := filepath.Join(r.cfg.Dir, rel)
		if !strings.HasPrefix(p, filepath.Clean(r.cfg.Dir)+string(filepath.Separator)) {
			undo()
			return "", fmt.Errorf("refusing to write %q outside the repository", rel)
		}
		if err := r.checkWritable(rel); err != nil {
			undo()
			return "", err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			undo()
			return "", err
		}
		if _, err := wt.Add(filepath.ToSlash(rel)); err != nil {
			undo()
			return "", err
		}
	}
	now := time.Now()
	h, err := wt.Commit(message, &git.CommitOptions{
		Author:    &object.Signature{Name: author.Name, Email: author.Email, When: now},
		Committer: &object.Signature{Name: r.cfg.User, Email: r.cfg.Email, When: now},
	})
	if err != nil {
		undo()
		return "", fmt.Errorf("committing: %w", err)
	}
	return h.String(), nil
}

// checkWritable refuses to write rel through a symbolic link, in the file
// itself or in any directory above it inside the clone: the repository's
// content is not fluxd's to trust, and a link would make fluxd write
// outside the clone. A file that does not exist yet is fine.
func (r *Repo) checkWritable(rel string) error {
	p := filepath.Clean(r.cfg.Dir)
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fluxerr.New(fluxerr.User, fmt.Errorf("refusing to write %s: %s is a symbolic link in the repository", rel, filepath.ToSlash(strings.TrimPrefix(p, filepath.Clean(r.cfg.Dir)+string(filepath.Separator)))),
				"fluxd edits only regular files inside its clone. Replace the link with the file it points to. Nothing was committed.")
		}
	}
	return nil
}

// Push pushes commit to the branch. Only a fast-forward is pushed, never a
// force: if the remote moved, the error wraps gitrepo.ErrMoved. On any
// failure the clone is reset to the remote, so the commit is not kept.
func (r *Repo) Push(ctx context.Context, commit string) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.repo == nil {
		return r.notCloned()
	}
	h := plumbing.NewHash(commit)
	err := r.network(ctx, "pushing", 1, func(ctx context.Context, px transport.ProxyOptions) error {
		return r.repo.PushContext(ctx, &git.PushOptions{
			Auth:         r.auth,
			ProxyOptions: px,
			RefSpecs:     []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:refs/heads/%s", h, r.cfg.Branch))},
		})
	})
	if err != nil {
		remoteRef, rerr := r.repo.Reference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), true)
		if rerr == nil {
			_ = r.resetTo(remoteRef.Hash())
		}
		if errors.Is(err, git.ErrNonFastForwardUpdate) || strings.Contains(err.Error(), "non-fast-forward") || strings.Contains(err.Error(), "fetch first") {
			return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%w: pushing to %s: %v", gitrepo.ErrMoved, Redact(r.cfg.URL), err), "Someone pushed in the meantime.")
		}
		return r.remoteError("pushing to", err)
	}
	// Keep the remote-tracking ref current, so the next sync is a no-op.
	_ = r.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), h))
	r.mu.Lock()
	r.status.Revision = commit
	r.mu.Unlock()
	return nil
}
