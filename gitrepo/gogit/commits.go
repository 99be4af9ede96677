package gogit

import (
	"context"
	"fmt"
	"strings"

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
