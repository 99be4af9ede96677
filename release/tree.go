package release

import "context"

// Snapshotter is a Repo that gives each revision's files as a directory
// no fetch, reset or commit changes while it is read (gogit.Repo).
type Snapshotter interface {
	Snapshot(ctx context.Context, rev string) (dir string, done func(), err error)
}

// readTree runs fn on the files of revision rev: every read of git (plans,
// listings, the sync, the automator, a take-over's check) sees one whole
// revision, never a working tree a fetch or a reset is rewriting, nor a
// commit of fluxd's that was never pushed. A Repo that cannot give
// snapshots is read in its working tree.
func (e *Engine) readTree(ctx context.Context, rev string, fn func(root string) error) error {
	s, ok := e.repo.(Snapshotter)
	if !ok || rev == "" {
		return fn(e.repo.Dir())
	}
	dir, done, err := s.Snapshot(ctx, rev)
	if err != nil {
		return err
	}
	defer done()
	return fn(dir)
}
