package release

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/verify"
)

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
	if !spec.Automated && !spec.Cached {
		// A person asked: an image signed a moment ago is seen now, not
		// after the unsigned result's minute in the cache. Not the
		// page's shared plan (Cached), which is made again every few
		// seconds while a page is open.
		ctx = verify.AskAgain(ctx)
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
	if spec.AllLatest && spec.Promotion == nil {
		lister.prefetchTags(ctx, latestRepositories(spec, targets, m, excluded, acc, keepsLists(e.images)))
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

// latestRepositories are the repositories a plan of the newest images
// will read the tags of: those of the targets the loop in planFrom
// passes to planLatest (in scope and in git, not excluded, automated
// for the automator, watched, not locked): those ordered by their tags,
// and with dated those ordered by build time too. It only chooses what
// prefetchTags reads ahead: a repository left out here is read when it
// is needed, one named here and not needed costs a read.
func latestRepositories(spec Spec, targets []platform.ID, m *gitrepo.Manifests, excluded map[platform.ID]bool, acc *accessMemo, dated bool) []string {
	var repos []string
	for _, id := range targets {
		def, ok := m.Workloads[id]
		if !ok || excluded[id] || !InScope(spec.Scope, id, def, m) || acc.watched(id) != nil ||
			(spec.Automated && def.Annotations[AnnotationAutomated] != "true") ||
			(def.Annotations[AnnotationLocked] == "true" && !(spec.Force && !spec.All && !spec.Automated)) {
			continue
		}
		for _, c := range def.Containers {
			ref, err := registry.ParseRef(c.Image)
			if err != nil || ref.Tag == "" {
				continue
			}
			pinned := pinnedIn(def, c.Name)
			if pinProblem(def, c, ref, pinned) != "" {
				continue // (planLatest reads nothing for it)
			}
			f, err := DefinitionFilter(def, c.Name)
			if err != nil {
				continue
			}
			// Ordered by build time, or a pinned tag followed by its
			// digest, a plan reads metadata (ImagesMatching), which
			// lists the tags first: a list read ahead serves it only
			// where the registry client keeps lists (keepsLists).
			if dated || !f.NeedsMetadata() && !(pinned && registry.HasTag(c.Image) && followsTag(def, f, ref.Tag)) {
				repos = append(repos, ref.Repository)
			}
		}
	}
	return repos
}

// keepsLists reports whether images answers a tag list read a moment
// ago without a request (registry/oci with --registry-list-min): then a
// list read ahead also serves the metadata read of a policy ordered by
// build time.
func keepsLists(images Images) bool {
	k, ok := images.(interface{ KeepsLists() bool })
	return ok && k.KeepsLists()
}
