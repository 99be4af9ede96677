package release

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/editdistance"
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

// Result is an executed release.
type Result struct {
	Plan *Plan
	// Commit is the pushed commit; empty when there was nothing to change.
	Commit string
	// NotRolledOut, when set, says the release was committed and
	// applied, but nothing reported on its rollout (StageNotRolledOut).
	NotRolledOut string
}

// Validate checks a spec on its own, before anything is read.
func (s Spec) Validate() error {
	if s.Promotion != nil {
		return s.validatePromotion() // (promote.go)
	}
	var errs []error
	if len(s.Services) == 0 && !s.All {
		errs = append(errs, errors.New("no services: name services to release, or all"))
	}
	if s.Image == "" && !s.AllLatest {
		errs = append(errs, errors.New("no image: give an image reference, or ask for all latest images"))
	}
	if err := checkMessage(s.Message); err != nil {
		errs = append(errs, err)
	}
	if s.Image != "" && s.AllLatest {
		errs = append(errs, errors.New("give an image reference or all latest images, not both"))
	}
	if s.Image != "" {
		ref, err := registry.ParseRef(s.Image)
		if err != nil {
			errs = append(errs, err)
		} else if ref.Digest != "" {
			errs = append(errs, fmt.Errorf("image %q names a digest; release a tag (with fluxd.io/pin-digest on the workload, the release writes the tag's digest itself)", s.Image))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fluxerr.New(fluxerr.User, err, "")
	}
	return nil
}

// checkMessage refuses a message that would go into a commit with a line
// fluxd's take-over reads as its own trailer.
func checkMessage(msg string) error {
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Fluxd-Job:") {
			return errors.New("the message has a 'Fluxd-Job:' line: fluxd writes that trailer itself, to find a job's commit after a restart; reword that line")
		}
	}
	return nil
}

// Plan computes what a release of spec would do, changing nothing. Git
// is read under the git lock; the registry after it is released, so that
// a registry that stalls holds no other caller of git (a deployer's lock,
// the sync, a job).
func (e *Engine) Plan(ctx context.Context, spec Spec) (*Plan, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	rev, m, err := e.readLocked(ctx, !spec.Cached)
	if err != nil {
		return nil, err
	}
	p, err := e.planFrom(ctx, spec, rev, m, newImageCache(e.images))
	return p, err
}

// readLocked reads the workload definitions under the git lock (after a
// fetch when fetch is set), and releases it.
func (e *Engine) readLocked(ctx context.Context, fetch bool) (string, *gitrepo.Manifests, error) {
	if err := e.lockGit(ctx); err != nil {
		return "", nil, err
	}
	defer e.unlockGit()
	return e.readManifests(ctx, fetch)
}

// planWarm plans spec without the git lock held while the registry is
// read: it reads git under the lock, reads the registry into lister
// after releasing it, and returns. The caller then takes the lock and
// plans again from lister alone (offline), which needs no request unless
// git changed in between (planLocked says so).
func (e *Engine) planWarm(ctx context.Context, spec Spec, lister *imageCache) error {
	rev, m, err := e.readLocked(ctx, !spec.Cached)
	if err != nil {
		return err
	}
	_, err = e.planFrom(ctx, spec, rev, m, lister)
	return err
}

// errRegistryUnderLock is what an offline imageCache answers for a read
// it was not warmed with: a plan under the git lock never reads the
// registry.
var errRegistryUnderLock = errors.New("a registry read was needed under the git lock")

// warmAttempts bounds how often an execution warms its registry reads
// again because git changed between the warm-up and the locked plan.
const warmAttempts = 3

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

// planLocked plans spec under the git lock (the caller holds it), from
// the clone as it is and the registry reads lister was warmed with. It
// reports retry when the plan needed a registry read lister had not made
// (git changed since the warm-up): the caller releases the lock and
// warms again.
func (e *Engine) planLocked(ctx context.Context, spec Spec, lister *imageCache) (p *Plan, m *gitrepo.Manifests, retry bool, err error) {
	rev, m, err := e.readManifests(ctx, false)
	if err != nil {
		return nil, nil, false, err
	}
	lister.offline, lister.missed = true, false
	defer func() { lister.offline = false }()
	p, err = e.planFrom(ctx, spec, rev, m, lister)
	if lister.missed {
		return nil, nil, true, nil
	}
	return p, m, false, err
}

// planFrom plans spec against the manifests m of revision rev, reading
// the registry through lister.
func (e *Engine) planFrom(ctx context.Context, spec Spec, rev string, m *gitrepo.Manifests, lister *imageCache) (*Plan, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	inCluster := map[platform.ID]bool{}
	running := map[string][]string{}
	var ws []platform.Workload
	if e.cluster != nil {
		var err error
		if ws, err = e.cluster.Workloads(ctx); err != nil {
			return nil, err
		}
		for _, w := range ws {
			inCluster[w.ID] = true
			for _, c := range w.Containers {
				running[w.ID.String()] = append(running[w.ID.String()], c.Name+"="+c.Image)
			}
		}
	}
	targets := spec.Services
	if spec.All {
		seen := map[platform.ID]bool{}
		targets = nil
		for id := range m.Workloads {
			seen[id] = true
			targets = append(targets, id)
		}
		for id := range inCluster {
			if !seen[id] {
				targets = append(targets, id)
			}
		}
	}
	excluded := map[platform.ID]bool{}
	for _, id := range spec.Exclude {
		excluded[id] = true
	}
	acc := newAccessMemo(e.cluster)
	if !spec.All && !spec.Automated {
		// A service named on its own that fluxd does not watch is
		// refused first, and before the registry is read for it.
		for _, id := range spec.Services {
			if def, ok := m.Workloads[id]; ok && !excluded[id] && InScope(spec.Scope, id, def, m) {
				if err := acc.watched(id); err != nil {
					return nil, fmt.Errorf("cannot release %s: %w", id, err)
				}
			}
		}
	}
	if spec.Image != "" {
		// Before any request: fluxd reads only registries its services
		// use, so a caller cannot make it contact any host it names.
		if err := watched(spec.Image, m, ws, spec.Scope); err != nil {
			return nil, err
		}
	}
	if spec.Promotion != nil {
		if err := checkPromotion(ctx, spec, m, lister); err != nil {
			return nil, err
		}
	}
	var target registry.Ref
	if spec.Image != "" {
		var err error
		if target, err = e.resolveTarget(ctx, spec.Image, lister); err != nil {
			return nil, err
		}
	}
	plan := &Plan{Revision: rev, Promotion: spec.Promotion}
	if len(targets) > 0 {
		plan.Items = make([]Item, 0, len(targets)) // (grown, 10,000 items left 8 MB of garbage)
	}
	for _, id := range targets {
		def, inGit := m.Workloads[id]
		if !InScope(spec.Scope, id, m.Workloads[id], m) {
			continue // outside the instance's scope: not there for it
		}
		item := Item{Service: id}
		unwatched := acc.watched(id)
		switch {
		case excluded[id]:
			item.Action, item.Reason = Skip, ReasonExcluded
		case !inGit:
			item.Action, item.Reason = Skip, ReasonNotInGit
		case spec.Automated && def.Annotations[AnnotationAutomated] != "true":
			// Read at the commit the release is made on: a service
			// de-automated while the job waited is left out of the batch.
			item.Action, item.Reason = Skip, ReasonNotAutomated
		case unwatched != nil:
			// Before any registry read: fluxd releases nothing it does
			// not watch, as it could not follow its rollout.
			if !spec.All && !spec.Automated {
				return nil, fmt.Errorf("cannot release %s: %w", id, unwatched)
			}
			if spec.All && !spec.AllLatest && !usesRepository(def, target.Repository) {
				continue // not part of a release of that image anyway
			}
			item.Action, item.Reason = Skip, refusedReason(unwatched)
		case def.Annotations[AnnotationLocked] == "true" && !(spec.Force && !spec.All && !spec.Automated):
			reason := LockReason(def.Annotations)
			if !spec.All && !spec.Automated {
				// Named explicitly: refuse rather than quietly skip.
				return nil, fluxerr.New(fluxerr.Precondition, fmt.Errorf("%s is %s", id, reason),
					"Unlock it (fluxctl unlock), or release it anyway with --force.")
			}
			item.Action, item.Reason = Skip, reason
		default:
			item.File = def.File
			if spec.Promotion != nil {
				planPromotion(ctx, &item, def, spec.Promotion, spec.Force, lister)
			} else if spec.AllLatest {
				planLatest(ctx, &item, def, lister, spec.Force)
			} else {
				planImage(ctx, &item, def, target, spec.Force, lister)
			}
			if err := e.verifyItem(ctx, spec, &item, def, lister); err != nil {
				return nil, err
			}
		}
		// With all services and one image, services that do not run the
		// image's repository are not part of the release at all.
		if spec.All && !spec.AllLatest && item.Reason == ReasonNotUsed {
			continue
		}
		plan.Items = append(plan.Items, item)
	}
	sort.Slice(plan.Items, func(i, j int) bool { return plan.Items[i].Service.Compare(plan.Items[j].Service) < 0 })
	if spec.Promotion != nil {
		if err := refuseHalfPromotion(spec, plan); err != nil {
			return nil, err
		}
	}
	if err := kustomizeSiblings(spec, plan, m); err != nil {
		return nil, err
	}
	if err := lockedSetterWorkloads(spec, plan, m); err != nil {
		return nil, err
	}
	leaveMarkedToPolicies(spec, plan, m)
	if err := refuseUnreleasable(ctx, spec, plan, m, acc); err != nil {
		return nil, err
	}
	targeted := map[string][]string{}
	for _, it := range plan.Items {
		if it.Action == Update {
			targeted[it.Service.String()] = running[it.Service.String()]
		}
	}
	digests := map[string]string{}
	for _, it := range plan.Items {
		if def, ok := m.Workloads[it.Service]; ok && it.Action == Update {
			digests[it.Service.String()] = def.Digest
		}
	}
	plan.Checksum = checksum(plan, targeted, digests)
	if !lister.missed {
		e.memory.add(plan, targeted, digests)
	}
	return plan, nil
}

// resolveTarget checks that the image to release exists, before anything
// else happens; a reference without a tag means its repository's newest
// image.
func (e *Engine) resolveTarget(ctx context.Context, image string, lister *imageCache) (registry.Ref, error) {
	target, err := registry.ParseRef(image)
	if err != nil {
		return registry.Ref{}, fluxerr.New(fluxerr.User, err, "")
	}
	if !registry.HasTag(image) {
		imgs, err := lister.get(ctx, target.Repository)
		if err != nil {
			return registry.Ref{}, err
		}
		if len(imgs) == 0 {
			return registry.Ref{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("repository %s has no images", target.Repository), "")
		}
		target.Tag = imgs[0].Tag
		return target, nil
	}
	ok, err := lister.exists(ctx, target.String())
	if err != nil {
		return registry.Ref{}, err
	}
	if ok {
		return target, nil
	}
	host, repo := splitHost(target.Repository)
	help := "Check the tag for typos, and that it was pushed."
	if imgs, err := lister.get(ctx, target.Repository); err == nil && len(imgs) > 0 {
		var tags []string
		for _, i := range imgs {
			tags = append(tags, i.Tag)
		}
		help = "The closest tags that do exist: " + strings.Join(editdistance.Closest(target.Tag, tags, 3), ", ") + "."
	}
	return registry.Ref{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("image %s:%s not found in %s", repo, target.Tag, host), help)
}

// splitHost splits "host:port/path" into the registry and the repository.
func splitHost(repository string) (string, string) {
	if i := strings.IndexByte(repository, '/'); i > 0 && strings.ContainsAny(repository[:i], ".:") {
		return repository[:i], repository[i+1:]
	}
	return "docker.io", repository
}

// LockReason says who locked a workload and why, from its annotations.
func LockReason(ann map[string]string) string {
	r := ReasonLocked
	if by := ann[AnnotationLockedBy]; by != "" {
		r += " by " + by
	}
	if msg := ann[AnnotationLockMessage]; msg != "" {
		r += ": " + msg
	}
	return r
}

// unversioned is the reason for a container whose manifest names no tag.
func unversioned(c gitrepo.Container, target string) string {
	return fmt.Sprintf("container %s runs %q, which has no tag; use --force to pin it to %s", c.Name, c.Image, target)
}

func planImage(ctx context.Context, item *Item, def *gitrepo.Definition, target registry.Ref, force bool, lister *imageCache) {
	var already, untagged, problems []string
	for _, c := range def.Containers {
		ref, err := registry.ParseRef(c.Image)
		if err != nil || ref.Repository != target.Repository {
			continue
		}
		if !registry.HasTag(c.Image) && !force {
			untagged = append(untagged, unversioned(c, target.String()))
			continue
		}
		pinned := pinnedIn(def, c.Name)
		if msg := pinProblem(def, c, ref, pinned); msg != "" && pinned {
			problems = append(problems, msg)
			continue
		}
		if pinned {
			u, reason := planDigest(ctx, lister, c, ref, target.Tag)
			switch {
			case reason != "":
				problems = append(problems, reason)
			case u == nil:
				already = append(already, c.Name)
			default:
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		if ref.Tag == target.Tag && ref.Digest == "" && registry.HasTag(c.Image) {
			already = append(already, c.Name)
			continue
		}
		item.Updates = append(item.Updates, ContainerUpdate{Container: c.Name, Current: c.Image, Target: target.String()})
	}
	switch {
	case len(item.Updates) > 0:
		// resolveTarget checked that the image exists.
		item.Action = Update
	case len(problems) > 0:
		item.Action, item.Reason = Skip, strings.Join(problems, "; ")
		item.Warnings = append(item.Warnings, problems...)
	case len(untagged) > 0:
		item.Action, item.Reason = Skip, strings.Join(untagged, "; ")
	case len(already) > 0:
		item.Action, item.Reason = UpToDate, fmt.Sprintf("container %s already uses %s", strings.Join(already, ", "), target)
	default:
		item.Action, item.Reason = Skip, ReasonNotUsed
	}
}

func planLatest(ctx context.Context, item *Item, def *gitrepo.Definition, lister *imageCache, force bool) {
	var reasons []string
	problem := func(warn bool, format string, args ...any) {
		r := fmt.Sprintf(format, args...)
		reasons = append(reasons, r)
		if warn {
			item.Warnings = append(item.Warnings, r)
		}
	}
	for _, c := range def.Containers {
		ref, err := registry.ParseRef(c.Image)
		if err != nil || ref.Tag == "" {
			problem(false, "%s: image %q is pinned by digest or invalid", c.Name, c.Image)
			continue
		}
		pinned := pinnedIn(def, c.Name)
		if msg := pinProblem(def, c, ref, pinned); msg != "" {
			problem(pinned, "%s", msg)
			continue
		}
		untagged := !registry.HasTag(c.Image)
		f, err := DefinitionFilter(def, c.Name)
		if err == nil && !untagged {
			// An image without a tag is pinned (--force) to the newest
			// version, whatever its filter is bound to.
			f, err = f.Bind(ref.Tag)
		}
		if err != nil {
			problem(true, "%s: invalid policy: %v", c.Name, err)
			continue
		}
		if pinned && !untagged && followsTag(def, f, ref.Tag) {
			if u, reason := planDigest(ctx, lister, c, ref, ref.Tag); reason != "" {
				problem(false, "%s", reason)
			} else if u != nil {
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		newest, cands, err := lister.newest(ctx, ref.Repository, f)
		switch {
		case err != nil:
			problem(false, "%s: %s: %s", c.Name, ReasonRegistry, firstLine(err))
			continue
		case cands == 0 && f.Kind != "":
			problem(true, "%s: tag filter %s matches no tag of %s", c.Name, f, ref.Repository)
			continue
		case cands == 0 && !registry.IsVersion(ref.Tag):
			problem(true, "%s: runs %q, which is not a version: without a tag filter fluxd does not guess which tag replaces it; set one (fluxctl policy SERVICE --tag-all 'semver:...' or 'glob:...')", c.Name, ref.Tag)
			continue
		case cands == 0:
			problem(false, "%s: %s (with no tag filter, only versions written like %q are candidates)", c.Name, ReasonNotFound, ref.Tag)
			continue
		case f.NeedsMetadata() && !newest.Dated():
			problem(true, "%s: no image of %s%s has a creation time, so the newest build cannot be told; order this container by semver (tag filter semver:...) or by name or number (tag order)", c.Name, ref.Repository, filterSuffix(f))
			continue
		}
		if untagged {
			if !force {
				reasons = append(reasons, unversioned(c, ref.Repository+":"+newest.Tag))
				continue
			}
		} else {
			if newest.Tag == ref.Tag && !pinned {
				continue
			}
			if newest.Tag == ref.Tag && ref.Digest != "" && def.ImagePolicy != nil && def.ImagePolicy.DigestReflection == "IfNotPresent" {
				continue // (Flux v2: IfNotPresent keeps a tag's digest until the tag changes)
			}
			if newest.Tag == ref.Tag {
				// A pinned tag that moved is released again.
				if u, reason := planDigest(ctx, lister, c, ref, ref.Tag); reason != "" {
					problem(false, "%s", reason)
				} else if u != nil {
					item.Updates = append(item.Updates, *u)
				}
				continue
			}
			if f.NeedsMetadata() {
				if cur, ok := lister.dated(ctx, ref.Repository, f, ref.Tag); ok && !newest.CreatedAt.After(cur.CreatedAt) {
					continue
				}
			} else if !f.Newer(newest.Tag, ref.Tag) && def.Format != gitrepo.FormatSetters {
				// (A Flux v2 ImagePolicy sets its fields to the tag it
				// picks, older or not, as Flux v2 does.)
				continue
			}
		}
		if pinned {
			if u, reason := planDigest(ctx, lister, c, ref, newest.Tag); reason != "" {
				problem(false, "%s", reason)
			} else if u != nil {
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		item.Updates = append(item.Updates, ContainerUpdate{Container: c.Name, Current: c.Image, Target: ref.Repository + ":" + newest.Tag})
	}
	switch {
	case len(item.Updates) > 0:
		item.Action = Update
	case len(reasons) > 0:
		item.Action, item.Reason = Skip, strings.Join(reasons, "; ")
	case len(def.Containers) == 0:
		item.Action, item.Reason = Skip, ReasonNoContainers
	default:
		item.Action, item.Reason = UpToDate, ReasonNoNewer
	}
}

func filterSuffix(f registry.Filter) string {
	if f.Kind == "" {
		return ""
	}
	return " passing " + f.String()
}

// edit returns the new content of every file the plan changes, applying
// the plan's updates to the files as they are now in the clone (after a
// retry, possibly a newer revision than the plan's).
func (e *Engine) edit(plan *Plan, m *gitrepo.Manifests) (map[string][]byte, error) {
	files := map[string][]byte{}
	for i := range plan.Items {
		it := &plan.Items[i]
		if it.Action != Update {
			continue
		}
		def, ok := m.Workloads[it.Service]
		if !ok {
			return nil, fmt.Errorf("%s is no longer defined in git", it.Service)
		}
		it.File = def.File
		// Every edit names the image it replaces, the plan's: git
		// holding another one refuses it (compare-and-swap). Where it
		// is written is the format's (gitrepo/format).
		if err := format.Of(def).Edit(e.repo.Dir(), def, updatesOf(*it), files); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func (e *Engine) fail(ctx context.Context, instance string, spec Spec, plan *Plan, start time.Time, commit string, err error) error {
	return e.failAs(ctx, history.Failed, instance, spec, plan, start, commit, err)
}

// failAs is fail recorded as typ (Failed, or Cancelled for a user's
// cancel).
func (e *Engine) failAs(ctx context.Context, typ history.Type, instance string, spec Spec, plan *Plan, start time.Time, commit string, err error) error {
	if stopping(ctx) {
		return e.interrupted(instance, commit, err)
	}
	ev := event(instance, spec, plan, typ, start)
	ev.Commit, ev.Error = commit, err.Error()
	// Recorded even when the job's context ended (a user's cancel): the
	// row is the cancel's record.
	if _, rerr := e.recorder.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		e.log.Error("recording a failed release in history failed", "error", rerr)
	}
	e.log.Warn("release failed", "instance", instance, "error", err)
	return err
}

// interrupted is fail for a job whose fluxd is stopping: nothing is
// recorded, and the error wraps ErrInterrupted so that the queue leaves
// the job live for whoever takes over.
func (e *Engine) interrupted(instance, commit string, err error) error {
	e.log.Info("fluxd is stopping: leaving the release for the next fluxd to carry on", "instance", instance, "commit", commit, "cause", err)
	return fmt.Errorf("%w (%v)", ErrInterrupted, err)
}

func event(instance string, spec Spec, plan *Plan, typ history.Type, start time.Time) history.Event {
	ev := history.Event{Instance: instance, Type: typ, User: spec.User, Message: messageOf(spec, plan), StartedAt: start, EndedAt: time.Now()}
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		ev.Services = append(ev.Services, it.Service.String())
		for _, u := range it.Updates {
			ev.Changes = append(ev.Changes, history.Change{Service: it.Service.String(), Container: u.Container, From: u.Current, To: u.Target})
		}
	}
	return ev
}

// commitMessage is "Release <images> to <instance> by <user>", with a body
// listing every change.
func commitMessage(instance string, spec Spec, plan *Plan) string {
	if spec.Promotion != nil {
		return promotionCommitMessage(instance, spec, plan)
	}
	var targets []string
	seen := map[string]bool{}
	var body strings.Builder
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		fmt.Fprintf(&body, "\n%s\n", it.Service)
		for _, u := range it.Updates {
			fmt.Fprintf(&body, "  %s: %s -> %s\n", u.Container, u.Current, u.Target)
			if line := u.Verification.commitLine(); line != "" {
				body.WriteString(line)
			}
			if !seen[u.Target] {
				seen[u.Target] = true
				targets = append(targets, u.Target)
			}
		}
	}
	user := spec.User
	if user == "" {
		user = "unknown"
	}
	msg := fmt.Sprintf("Release %s to %s by %s\n", strings.Join(targets, ", "), instance, user)
	if m := messageOf(spec, plan); m != "" {
		msg += "\n" + m + "\n"
	}
	return msg + body.String()
}

// messageOf is the message recorded for spec carried out as plan. An
// automated release's message is written from the plan executed, not
// from the automator's decision: the job plans again when it runs, and a
// policy changed in between (a new tag filter) may choose other images.
func messageOf(spec Spec, plan *Plan) string {
	if spec.Promotion != nil {
		return PromotionMessage(spec)
	}
	if !spec.Automated || plan == nil || plan.Updates() == 0 {
		if note := unverifiedNote(spec, plan); note != "" {
			return strings.TrimSpace(spec.Message + "\n\n" + note)
		}
		return spec.Message
	}
	return AutomatedMessage(plan.Items)
}

// AutomatedMessage is "automated release of <service> <container>=<image>,
// ...; <service> ...", naming the updates among items.
func AutomatedMessage(items []Item) string {
	var targets []string
	for _, it := range items {
		if it.Action != Update {
			continue
		}
		var us []string
		for _, u := range it.Updates {
			us = append(us, u.Container+"="+u.Target)
		}
		targets = append(targets, it.Service.String()+" "+strings.Join(us, ", "))
	}
	return "automated release of " + strings.Join(targets, "; ")
}

// imageCache reads each repository once per plan, and only what the
// policies need: the tag list alone for orders by version, name or number;
// metadata only for the tags a filter passes when ordering by build time.
type imageCache struct {
	images Images
	byKey  map[listKey]cached
	tags   map[string]cachedTags
	found  map[string]cachedExists
	// heads are the digests a promotion read with a HEAD (promote.go),
	// by headKey: the rest of its plan reads those, not the cache.
	heads map[string]cachedDigest
	// verdicts are the plan's signature verifications (verify.go).
	verdicts map[verdictKey]verdictAnswer
	// best is newest's answer by repository and policy: the workloads
	// that share both share one ranking of the repository's tags.
	best map[bestKey]cachedBest
	// offline answers only what was read before (a plan under the git
	// lock): a read not made yet sets missed and fails.
	offline, missed bool
}

type cachedExists struct {
	ok  bool
	err error
}

// listKey is a repository's list under one filter.
type listKey struct{ repository, filter string }

type cached struct {
	imgs []registry.Image
	err  error
}

// bestKey is a repository under one policy: its filter, bound to the
// running tag where that matters (Key), and what Key leaves out.
type bestKey struct {
	repository, filter string
	order              registry.Order
	prerelease         bool
}

type cachedBest struct {
	img   registry.Image
	cands int
}

type cachedTags struct {
	tags []string
	err  error
}

func newImageCache(images Images) *imageCache {
	return &imageCache{images: images, byKey: map[listKey]cached{}, tags: map[string]cachedTags{}, found: map[string]cachedExists{}}
}

// exists checks that ref is in its registry, once per plan.
func (c *imageCache) exists(ctx context.Context, ref string) (bool, error) {
	if r, ok := c.found[ref]; ok {
		return r.ok, r.err
	}
	if c.offline {
		c.missed = true
		return false, errRegistryUnderLock
	}
	ok, err := c.images.Exists(ctx, ref)
	c.found[ref] = cachedExists{ok, err}
	return ok, err
}

// get lists every image of a repository, newest first.
func (c *imageCache) get(ctx context.Context, repo string) ([]registry.Image, error) {
	return c.matching(ctx, repo, registry.EveryTag)
}

func (c *imageCache) matching(ctx context.Context, repo string, f registry.Filter) ([]registry.Image, error) {
	key := listKey{repo, f.Key()}
	if r, ok := c.byKey[key]; ok {
		return r.imgs, r.err
	}
	if c.offline {
		c.missed = true
		return nil, errRegistryUnderLock
	}
	imgs, err := c.images.ImagesMatching(ctx, repo, f.Match)
	c.byKey[key] = cached{imgs, err}
	return imgs, err
}

func (c *imageCache) tagList(ctx context.Context, repo string) ([]string, error) {
	if r, ok := c.tags[repo]; ok {
		return r.tags, r.err
	}
	if c.offline {
		c.missed = true
		return nil, errRegistryUnderLock
	}
	tags, err := c.images.Tags(ctx, repo)
	c.tags[repo] = cachedTags{tags, err}
	return tags, err
}

// Newest returns the best image of repository that the filter f passes
// and how many it passes, as a plan finds it for a container under that
// policy: from the tag list alone for orders by version, name or number,
// with metadata only for the passing tags under build time.
func Newest(ctx context.Context, images Images, repository string, f registry.Filter) (registry.Image, int, error) {
	return newImageCache(images).newest(ctx, repository, f)
}

// newest returns the best image a filter passes and how many it passes.
// Under orders other than build time the image carries its tag only.
func (c *imageCache) newest(ctx context.Context, repo string, f registry.Filter) (registry.Image, int, error) {
	if f.NeedsMetadata() {
		imgs, err := c.matching(ctx, repo, f)
		if err != nil || len(imgs) == 0 {
			return registry.Image{}, 0, err
		}
		return imgs[0], len(imgs), nil
	}
	key := bestKey{repo, f.Key(), f.Order, f.Prerelease}
	if r, ok := c.best[key]; ok {
		return r.img, r.cands, nil
	}
	tags, err := c.tagList(ctx, repo)
	if err != nil {
		return registry.Image{}, 0, err
	}
	if c.best == nil {
		c.best = map[bestKey]cachedBest{}
	}
	var pass []string
	for _, t := range tags {
		if f.Match(t) {
			pass = append(pass, t)
		}
	}
	if len(pass) == 0 {
		c.best[key] = cachedBest{}
		return registry.Image{}, 0, nil
	}
	f.Rank(pass)
	c.best[key] = cachedBest{registry.Image{Repository: repo, Tag: pass[0]}, len(pass)}
	return c.best[key].img, len(pass), nil
}

// dated returns the running tag's image when its creation time is known:
// from the list its filter read, or with a read of that one tag (a tag
// the filter does not pass).
func (c *imageCache) dated(ctx context.Context, repo string, f registry.Filter, tag string) (registry.Image, bool) {
	if r, ok := c.byKey[listKey{repo, f.Key()}]; ok {
		if img, ok := findTag(r.imgs, tag); ok {
			return img, img.Dated()
		}
	}
	imgs, err := c.matching(ctx, repo, registry.Filter{Kind: "glob", Pattern: tag})
	if err != nil || len(imgs) == 0 {
		return registry.Image{}, false
	}
	return imgs[0], imgs[0].Dated()
}

func findTag(imgs []registry.Image, tag string) (registry.Image, bool) {
	for _, i := range imgs {
		if i.Tag == tag {
			return i, true
		}
	}
	return registry.Image{}, false
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// workloadDoc is the YAML of workload id to apply, from the file that
// defines it: its document in content, or, for a kustomization file, what
// the kustomization builds from the clone (which holds content then).
func (e *Engine) workloadDoc(file string, content []byte, id platform.ID) ([]byte, error) {
	if gitrepo.IsKustomization(file) {
		return gitrepo.BuiltWorkload(e.repo.Dir(), file, id)
	}
	return gitrepo.WorkloadDocument(content, id)
}
