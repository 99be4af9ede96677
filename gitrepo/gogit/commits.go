package gogit

import (
	"context"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fluxd/fluxd/gitrepo"
)

// maxCommitsListed bounds Commits: an error message names a few commits,
// not a whole history.
const maxCommitsListed = 50

// Commits lists the commits after from up to to (newest first, at most
// 50), with the files each changed against its first parent, so that an
// error can say who changed what since a plan was made. It reads the
// clone as last synced.
func (r *Repo) Commits(ctx context.Context, from, to string) ([]gitrepo.CommitInfo, error) {
	if err := r.acquire(ctx); err != nil {
		return nil, err
	}
	defer r.release()
	if r.repo == nil {
		return nil, r.notCloned()
	}
	c, err := r.repo.CommitObject(plumbing.NewHash(to))
	if err != nil {
		return nil, fmt.Errorf("reading commit %.12s: %w", to, err)
	}
	var out []gitrepo.CommitInfo
	for len(out) < maxCommitsListed && c.Hash.String() != from {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		info := gitrepo.CommitInfo{Hash: c.Hash.String(), Author: c.Author.Name, Email: c.Author.Email, When: c.Author.When}
		info.Subject, _, _ = strings.Cut(c.Message, "\n")
		tree, err := c.Tree()
		if err != nil {
			return out, err
		}
		var parent *object.Commit
		var ptree *object.Tree
		if c.NumParents() > 0 {
			if parent, err = c.Parent(0); err != nil {
				return out, err
			}
			if ptree, err = parent.Tree(); err != nil {
				return out, err
			}
		}
		changes, err := object.DiffTreeWithOptions(ctx, ptree, tree, nil)
		if err != nil {
			return out, err
		}
		for _, ch := range changes {
			name := ch.To.Name
			if name == "" {
				name = ch.From.Name
			}
			info.Files = append(info.Files, name)
		}
		out = append(out, info)
		if parent == nil {
			break
		}
		c = parent
	}
	return out, nil
}

// FindCommit returns the newest of the last depth commits on the remote
// branch whose message contains line as a line of its own (a trailer such
// as "Fluxd-Job: 1234"), or "" when none does. It reads the clone as last
// synced; call Sync first.
func (r *Repo) FindCommit(ctx context.Context, line string, depth int) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	ref, err := r.repo.Reference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), true)
	if err != nil {
		return "", r.remoteError("reading", err)
	}
	iter, err := r.repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return "", fmt.Errorf("reading the history of %s: %w", r.cfg.Branch, err)
	}
	defer iter.Close()
	for i := 0; i < depth; i++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		c, err := iter.Next()
		if err != nil {
			break // io.EOF: the start of history
		}
		if c.Committer.Email != r.cfg.Email {
			continue // only commits fluxd made carry its trailers
		}
		for _, l := range strings.Split(c.Message, "\n") {
			if strings.TrimSpace(l) == line {
				return c.Hash.String(), nil
			}
		}
	}
	return "", nil
}
