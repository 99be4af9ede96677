package gogit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fluxd/fluxd/gitrepo"
)

// Snapshots: every read of git (plans, listings, the sync, the automator)
// must see one whole revision, never the working tree while a fetch or a
// reset rewrites it, nor a commit of fluxd's that was never pushed. So a
// reader reads a snapshot: a directory written once from git's objects
// for one revision, then never changed. A snapshot is written while the
// clone is locked (go-git's object store is not for concurrent use), and
// read without any lock; a file unchanged since the snapshot before is a
// hard link to that snapshot's copy, so a new revision costs what
// changed. The newest keepSnapshots snapshots stay; older ones go once no
// reader holds them.

// keepSnapshots is how many of the newest snapshots are kept when nobody
// reads them.
const keepSnapshots = 3

type snapshot struct {
	dir   string
	refs  int
	blobs map[string]plumbing.Hash // path → blob, for hard links
}

type snapshots struct {
	mu     sync.Mutex
	byRev  map[string]*snapshot
	newest []string // revisions, newest last
}

// snapshotRoot is where snapshots live, beside the clone (which Clone
// replaces).
func (r *Repo) snapshotRoot() string { return filepath.Clean(r.cfg.Dir) + ".snapshots" }

// Snapshot returns a directory holding exactly the tree of revision rev,
// which no fetch, reset or commit changes while it is held; done gives it
// back. rev must be in the clone (a revision Sync returned, or a commit
// Commit made).
func (r *Repo) Snapshot(ctx context.Context, rev string) (dir string, done func(), err error) {
	if s := r.holdSnapshot(rev); s != nil {
		return s.dir, r.releaser(rev), nil
	}
	if err := r.acquire(ctx); err != nil {
		return "", nil, err
	}
	defer r.release()
	if r.repo == nil {
		return "", nil, r.notCloned()
	}
	if s := r.holdSnapshot(rev); s != nil { // written while this call waited
		return s.dir, r.releaser(rev), nil
	}
	s, err := r.writeSnapshot(ctx, rev)
	if err != nil {
		return "", nil, fmt.Errorf("reading revision %.12s: %w", rev, err)
	}
	r.snaps.mu.Lock()
	if r.snaps.byRev == nil {
		r.snaps.byRev = map[string]*snapshot{}
	}
	s.refs = 1
	r.snaps.byRev[rev] = s
	r.snaps.newest = append(r.snaps.newest, rev)
	drop := r.pruneLocked()
	r.snaps.mu.Unlock()
	removeAll(drop)
	return s.dir, r.releaser(rev), nil
}

// holdSnapshot returns rev's snapshot, held, or nil when there is none.
func (r *Repo) holdSnapshot(rev string) *snapshot {
	r.snaps.mu.Lock()
	defer r.snaps.mu.Unlock()
	s := r.snaps.byRev[rev]
	if s != nil {
		s.refs++
	}
	return s
}

// releaser gives rev's snapshot back once, and removes the snapshots
// that are no longer kept.
func (r *Repo) releaser(rev string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r.snaps.mu.Lock()
			if s := r.snaps.byRev[rev]; s != nil {
				s.refs--
			}
			drop := r.pruneLocked()
			r.snaps.mu.Unlock()
			removeAll(drop)
		})
	}
}

// pruneLocked forgets the snapshots older than the kept ones that nobody
// holds, and returns their directories to remove.
func (r *Repo) pruneLocked() []string {
	var drop []string
	keep := r.snaps.newest[:0]
	for i, rev := range r.snaps.newest {
		s := r.snaps.byRev[rev]
		if i < len(r.snaps.newest)-keepSnapshots && s.refs == 0 {
			delete(r.snaps.byRev, rev)
			// Moved aside at once, removed later: a snapshot of the same
			// revision may be written again meanwhile.
			trash := s.dir + ".old-" + randomSuffix()
			if err := os.Rename(s.dir, trash); err == nil {
				drop = append(drop, trash)
			}
			continue
		}
		keep = append(keep, rev)
	}
	r.snaps.newest = keep
	return drop
}

func removeAll(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// writeSnapshot writes rev's tree into a new directory, then renames it
// into place. The clone is locked.
func (r *Repo) writeSnapshot(ctx context.Context, rev string) (*snapshot, error) {
	commit, err := r.repo.CommitObject(plumbing.NewHash(rev))
	if err != nil {
		return nil, err
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, err
	}
	root := r.snapshotRoot()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(root, "tmp-"+rev+"-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	// Every write goes through troot, which never follows a link out of
	// the snapshot.
	troot, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, err
	}
	defer troot.Close()
	prev := r.latestSnapshot()
	s := &snapshot{dir: filepath.Join(root, rev), blobs: map[string]plumbing.Hash{}}
	files, dirs := map[string]bool{}, map[string]bool{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := filepath.FromSlash(f.Name)
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("the tree holds the path %q, outside the repository", f.Name)
		}
		// A tree with two entries of one name (git fsck refuses it; a
		// push may not) would have a file or link stand where a
		// directory's files go: MkdirAll would follow a link there.
		if files[f.Name] || dirs[f.Name] {
			return fmt.Errorf("the tree holds two entries named %q (git fsck calls this duplicateEntries); rewrite the commit that made it", f.Name)
		}
		for d := path.Dir(f.Name); d != "."; d = path.Dir(d) {
			if files[d] {
				return fmt.Errorf("the tree holds two entries named %q (git fsck calls this duplicateEntries); rewrite the commit that made it", d)
			}
			dirs[d] = true
		}
		files[f.Name] = true
		p := filepath.Join(tmp, rel)
		if err := troot.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return err
		}
		switch f.Mode {
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
		case filemode.Symlink:
			// Kept a link, so that readers refuse it as they refuse one
			// in the working tree.
			target, err := f.Contents()
			if err != nil {
				return err
			}
			return troot.Symlink(target, rel)
		default:
			return nil // a submodule: nothing to read
		}
		s.blobs[f.Name] = f.Hash
		if prev != nil && prev.blobs[f.Name] == f.Hash {
			if err := os.Link(filepath.Join(prev.dir, filepath.FromSlash(f.Name)), p); err == nil {
				return nil
			}
		}
		// The working tree (at rev after a fetch) has most files
		// already: a copy whose hash is the blob's is the blob, and
		// costs less than reading it from a pack.
		// (gitrepo.ReadFile: no symbolic link on the way is followed,
		// whatever revision the working tree is at.)
		if b, err := gitrepo.ReadFile(r.cfg.Dir, filepath.FromSlash(f.Name)); err == nil && plumbing.ComputeHash(plumbing.BlobObject, b) == f.Hash {
			return troot.WriteFile(rel, b, 0o444)
		}
		return writeBlob(f, troot, rel)
	})
	if err != nil {
		return nil, err
	}
	// A directory already there is no snapshot anyone holds (those are
	// in r.snaps): left over, it is replaced.
	_ = os.RemoveAll(s.dir)
	if err := os.Rename(tmp, s.dir); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func randomSuffix() string {
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// latestSnapshot is the newest snapshot, for hard links; it is kept at
// least until the one being written is in place.
func (r *Repo) latestSnapshot() *snapshot {
	r.snaps.mu.Lock()
	defer r.snaps.mu.Unlock()
	if n := len(r.snaps.newest); n > 0 {
		return r.snaps.byRev[r.snaps.newest[n-1]]
	}
	return nil
}

func writeBlob(f *object.File, root *os.Root, p string) error {
	rd, err := f.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	w, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, rd); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
