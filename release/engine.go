package release

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Repo is the git working clone.
type Repo interface {
	// Sync fetches and checks out the remote branch, returning its revision.
	Sync(ctx context.Context) (string, error)
	// Dir is the clone's root; Paths are the manifest sub-paths.
	Dir() string
	Paths() []string
	// Commit commits files locally on top of base; an error wrapping
	// gitrepo.ErrMoved means base is no longer the remote's head.
	Commit(ctx context.Context, base string, files map[string][]byte, message string, author gitrepo.Signature) (string, error)
	// Push pushes a commit made by Commit, fast-forward only.
	Push(ctx context.Context, commit string) error
	// FindCommit returns the newest of the branch's last depth commits
	// with line in its message, or "".
	FindCommit(ctx context.Context, line string, depth int) (string, error)
}

// Images reads the registry.
type Images interface {
	// Tags lists a repository's tags, one list request per page.
	Tags(ctx context.Context, repository string) ([]string, error)
	// ImagesMatching lists the images of the tags keep passes (all when
	// nil) with their creation times, newest first, undated last.
	ImagesMatching(ctx context.Context, repository string, keep func(tag string) bool) ([]registry.Image, error)
	// Exists checks that repository:tag is in its registry.
	Exists(ctx context.Context, ref string) (bool, error)
}

// Cluster is what a release needs of the cluster.
type Cluster interface {
	Workloads(ctx context.Context) ([]platform.Workload, error)
	// Apply applies a workload's manifest and returns the generation its
	// rollout must reach.
	Apply(ctx context.Context, id platform.ID, manifest []byte) (int64, error)
	// Diagnose says what a workload's pods report, for an error message.
	Diagnose(ctx context.Context, id platform.ID) string
}

// applyChecker is a Cluster that can tell, before anything is committed,
// that it would refuse to apply a workload's manifest (platform/kube: one
// git may not apply, in fluxd's namespace or running as its
// ServiceAccount).
type applyChecker interface {
	MayApply(id platform.ID, manifest []byte) error
}

// Recorder keeps history.
type Recorder interface {
	Record(ctx context.Context, ev history.Event) (int64, error)
}

// Engine plans and executes releases, one at a time.
type Engine struct {
	repo     Repo
	images   Images
	cluster  Cluster
	recorder Recorder
	log      *slog.Logger

	// git is one git operation at a time (the clone is shared); waiting
	// for it ends with the caller's context, so a stalled remote holds no
	// caller longer than it is willing to wait.
	git    *semaphore.Weighted
	deploy sync.Mutex // one deployment at a time, its rollout included
	// apply is held by whatever writes git's state to the cluster: a
	// release's (or rollback's) push and apply, and the sync's read and
	// apply (Exclusive). Without it a sync that read git before a release
	// pushed could apply the old image after the release applied the new
	// one. Taken before git, never after it.
	apply *semaphore.Weighted
	// deploying counts releases and rollbacks waiting for apply: the
	// sync yields to them between objects (DeployWaiting).
	deploying atomic.Int32
	memory    planMemory
	// verifier checks images' signatures where a profile applies
	// (verify.go); nil: none is checked.
	verifier Verifier

	// onRevision, if set, is told each revision a fetch finds that
	// differs from the one before (the sync is kicked by it, so any
	// fetch serves it); lastRev is the one before. Both under the git
	// lock.
	onRevision []func(rev string)
	lastRev    string
	// parsed is the last revision's workload definitions (readManifests),
	// under the git lock.
	parsed parsedRevision
}

// parsedRevision is a revision's definitions read from its snapshot: a
// revision's files never change, so the automator's pass, its plan and a
// dry run of the same revision share one parse (at 10,000 workloads,
// seconds of YAML). Shared: nothing may modify them.
type parsedRevision struct {
	rev, paths string
	m          *gitrepo.Manifests
}

// OnRevision adds f to be called, under the git lock, with each new
// revision a fetch finds or a push makes (the sync, and the daemon's
// listings, follow git by it). f must not block. Call before using e.
func (e *Engine) OnRevision(f func(rev string)) { e.onRevision = append(e.onRevision, f) }

// tellRevision calls every OnRevision function with rev.
func (e *Engine) tellRevision(rev string) {
	for _, f := range e.onRevision {
		f(rev)
	}
}

// fetch syncs the clone to the remote, under the git lock, and tells
// onRevision of a new revision.
func (e *Engine) fetch(ctx context.Context) (string, error) {
	rev, err := e.repo.Sync(ctx)
	if err == nil && rev != e.lastRev {
		e.lastRev = rev
		e.tellRevision(rev)
	}
	return rev, err
}

// Read runs fn on the clone under the git lock, after fetching the remote
// when fetch is set: the sync reads git through it, so that it shares the
// engine's fetches and never reads a tree a release is rewriting. A quiet
// read (a dry run's) does not tell onRevision of what it fetched: the
// next fetch does, so the commit is synced then and not because of the
// dry run.
func (e *Engine) Read(ctx context.Context, fetch, quiet bool, fn func(rev, root string, paths []string) error) error {
	if err := e.lockGit(ctx); err != nil {
		return err
	}
	defer e.unlockGit()
	if quiet {
		rev, err := e.repo.Sync(ctx)
		if err != nil {
			return err
		}
		return e.readTree(ctx, rev, func(root string) error { return fn(rev, root, e.repo.Paths()) })
	}
	rev := e.lastRev
	if h, ok := e.repo.(interface{ Head() (string, error) }); ok && !fetch && rev != "" {
		// A release's commit that did not reach the remote may be
		// checked out: only the remote's revision is read.
		if head, err := h.Head(); err != nil || head != rev {
			fetch = true
		}
	}
	if fetch || rev == "" {
		var err error
		if rev, err = e.fetch(ctx); err != nil {
			return err
		}
	}
	return e.readTree(ctx, rev, func(root string) error { return fn(rev, root, e.repo.Paths()) })
}

// NewEngine returns an Engine.
func NewEngine(repo Repo, images Images, cluster Cluster, recorder Recorder, log *slog.Logger) *Engine {
	return &Engine{git: semaphore.NewWeighted(1), apply: semaphore.NewWeighted(1), repo: repo, images: images, cluster: cluster, recorder: jobRecorder{recorder}, log: log.With("component", "release")}
}

// lockGit waits for the git lock until ctx ends.
func (e *Engine) lockGit(ctx context.Context) error {
	if err := e.git.Acquire(ctx, 1); err != nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("waiting for another git operation to finish: %w", err),
			"fluxd works on its clone of the repository one operation at a time, and the one before is still running (a slow or stalled git remote?). Try again shortly; 'fluxctl list-services' shows the remote's state.")
	}
	return nil
}

func (e *Engine) unlockGit() { e.git.Release(1) }

// Exclusive runs fn while no release or rollback pushes or applies: the
// sync reads git and applies it inside, so what it applies is never
// older than what a release applied. Waiting ends with ctx.
func (e *Engine) Exclusive(ctx context.Context, fn func() error) error {
	if err := e.lockApply(ctx); err != nil {
		return err
	}
	defer e.apply.Release(1)
	return fn()
}

// DeployWaiting reports whether a release or rollback waits to push and
// apply: a sync inside Exclusive asks it between objects and stops, so a
// release waits at most for the object being applied, never for a whole
// sync.
func (e *Engine) DeployWaiting() bool { return e.deploying.Load() > 0 }

func (e *Engine) lockApply(ctx context.Context) error {
	if err := e.apply.Acquire(ctx, 1); err != nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("waiting for the sync or a release to finish applying: %w", err),
			"fluxd applies git to the cluster one operation at a time (a release, a rollback or the sync), and the one before is still applying. Try again shortly.")
	}
	return nil
}

// lockDeploy takes the apply lock, then the git lock: a release's push
// and apply hold both.
func (e *Engine) lockDeploy(ctx context.Context) error {
	e.deploying.Add(1)
	err := e.lockApply(ctx)
	e.deploying.Add(-1)
	if err != nil {
		return err
	}
	if err := e.lockGit(ctx); err != nil {
		e.apply.Release(1)
		return err
	}
	return nil
}

func (e *Engine) unlockDeploy() {
	e.unlockGit()
	e.apply.Release(1)
}

// pushed tells onRevision of a commit fluxd itself pushed (under the git
// lock), so that the sync applies the whole of it after the release's
// own apply of the workloads it changed.
func (e *Engine) pushed(rev string) {
	if rev == "" || rev == e.lastRev {
		return
	}
	e.lastRev = rev
	e.tellRevision(rev)
}
