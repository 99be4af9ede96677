package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// ContainerImages is one container's current image, what its repository
// offers, and what its policy makes of it.
type ContainerImages struct {
	Container string
	Current   string
	Available []registry.Image
	// Err says why the images could not be read.
	Err error
	// Filter is the container's tag filter; Passing the tags it passes,
	// best first; Best the one a release of the latest images picks.
	Filter   string
	Passing  []string
	Best     string
	Warnings []string
	// Refresh says whether Available came from the cache while a refresh
	// runs, or after one failed.
	Refresh registry.RefreshStatus
	// Read counts the images of Available whose digest and creation time
	// are read; the others (no Digest) are being read in the background.
	Read int
	// Verified is, by tag, the signature verification of the images the
	// page shows, where a verification profile applies to them (nil
	// where none does, or fluxd verifies nothing).
	Verified map[string]release.Verification
}

// cachedImages is the side of the image lister that can answer from its
// cache without a request (registry/oci's Client).
type cachedImages interface {
	Cached(ctx context.Context, repository string) ([]registry.Image, error)
	Status(repository string) registry.RefreshStatus
}

// images refreshes a repository, shared by concurrent callers, and waits
// for it at most ListWait: a repository too big to scan in that time is
// answered from the cache, marked as refreshing, and the refresh goes on
// in the background. A failed refresh is answered from the cache too,
// with its error, when the cache knows the repository.
func (d *Daemon) images(ctx context.Context, repo string) ([]registry.Image, registry.RefreshStatus, error) {
	ch := d.refreshes.DoChan(repo, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		return d.deps.Images.Images(rctx, repo)
	})
	result := func(r singleflight.Result) ([]registry.Image, registry.RefreshStatus, error) {
		if r.Err != nil {
			return nil, registry.RefreshStatus{}, r.Err
		}
		return r.Val.([]registry.Image), registry.RefreshStatus{}, nil
	}
	// await waits for the refresh after all, as long as the caller does.
	await := func() ([]registry.Image, registry.RefreshStatus, error) {
		select {
		case r := <-ch:
			return result(r)
		case <-ctx.Done():
			return nil, registry.RefreshStatus{}, ctx.Err()
		}
	}
	cache, hasCache := d.deps.Images.(cachedImages)
	fromCache := func(st registry.RefreshStatus, cause error) ([]registry.Image, registry.RefreshStatus, error) {
		imgs, err := cache.Cached(ctx, repo)
		if err != nil || len(imgs) == 0 {
			if cause != nil {
				return nil, st, cause
			}
			return await() // nothing cached yet
		}
		return imgs, st, nil
	}
	wait := d.cfg.ListWait
	if wait <= 0 {
		wait = 3 * time.Second
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.Err == nil || !hasCache {
			return result(r)
		}
		st := cache.Status(repo)
		st.LastError = firstLine(r.Err)
		return fromCache(st, r.Err)
	case <-timer.C:
		if !hasCache {
			return await()
		}
		st := cache.Status(repo)
		st.Refreshing = true
		return fromCache(st, nil)
	case <-ctx.Done():
		return nil, registry.RefreshStatus{}, ctx.Err()
	}
}

// ListImages returns, for each container of the named service, the images
// of its repository, with what the container's policy passes: see
// ListImagesPage, for the first page.
func (d *Daemon) ListImages(ctx context.Context, id auth.Identity, name string) (Service, []ContainerImages, error) {
	return d.ListImagesPage(ctx, id, name, defaultPage)
}

// ListImagesPage returns, for each container of the named service, the
// images of its repository with what the container's policy passes. Under
// a policy ordered by version, name or number the passing tags come
// first, best first, from the tag list alone; under build time, newest
// first as far as known. The images of the page and the running one are
// read before the answer; the rest of a big repository in the background
// (ContainerImages.Read says how far it is).
func (d *Daemon) ListImagesPage(ctx context.Context, _ auth.Identity, name string, page Page) (Service, []ContainerImages, error) {
	svc, err := d.resolve(ctx, name)
	if err != nil {
		return Service{}, nil, err
	}
	if lister, ok := d.deps.Images.(pagedImages); ok {
		out := d.listPaged(ctx, svc, lister, page)
		for i := range out {
			d.verifyShown(ctx, svc, &out[i], page)
		}
		return svc, out, nil
	}
	type listed struct {
		imgs []registry.Image
		st   registry.RefreshStatus
		err  error
	}
	byRepo := map[string]listed{}
	var out []ContainerImages
	for _, c := range svc.Containers {
		ci := ContainerImages{Container: c.Name, Current: c.Image}
		ref, err := registry.ParseRef(c.Image)
		if err != nil {
			ci.Err = err
			out = append(out, ci)
			continue
		}
		l, ok := byRepo[ref.Repository]
		if !ok {
			l.imgs, l.st, l.err = d.images(ctx, ref.Repository)
			byRepo[ref.Repository] = l
		}
		ci.Available, ci.Refresh, ci.Err = l.imgs, l.st, l.err
		ci.Read = len(ci.Available)
		if ci.Err == nil {
			applyPolicy(&ci, svc.def, svc.annotations, ref)
			d.verifyShown(ctx, svc, &ci, page)
		}
		out = append(out, ci)
	}
	return svc, out, nil
}

// applyPolicy ranks what the container's tag filter passes and warns
// about a filter that passes nothing or about images without a creation
// time where the order needs one.
func applyPolicy(ci *ContainerImages, def *gitrepo.Definition, ann map[string]string, ref registry.Ref) {
	f, err := containerFilter(def, ann, ci.Container, ref)
	if err != nil {
		ci.Filter = "invalid"
		ci.Warnings = append(ci.Warnings, "invalid policy: "+err.Error())
		return
	}
	ci.Filter = f.String()
	undated := 0
	for _, img := range ci.Available { // newest first, undated last
		if f.Match(img.Tag) {
			ci.Passing = append(ci.Passing, img.Tag)
			if !img.Dated() {
				undated++
			}
		}
	}
	if !f.NeedsMetadata() {
		f.Rank(ci.Passing)
	}
	if len(ci.Passing) == 0 {
		if f.Kind != "" {
			ci.Warnings = append(ci.Warnings, fmt.Sprintf("tag filter %s matches none of the %d tags of %s", f, len(ci.Available), ref.Repository))
		}
		return
	}
	ci.Best = ci.Passing[0]
	if f.NeedsMetadata() && undated > 0 {
		w := fmt.Sprintf("%d of the images passing %s have no creation time; they sort last and are never picked by build time", undated, f)
		if undated == len(ci.Passing) {
			w = fmt.Sprintf("no image passing %s has a creation time, so the newest build cannot be told; use a semver filter or --tag-order", f)
			ci.Best = ""
		}
		ci.Warnings = append(ci.Warnings, w)
	}
}

// ReleaseRequest is a release as asked for: service names as typed.
type ReleaseRequest struct {
	Services  []string
	All       bool
	Exclude   []string
	Image     string
	AllLatest bool
	User      string
	Message   string
	Execute   bool
	// Checksum, on an execution, must match the plan when it runs.
	Checksum          string
	RollbackOnFailure bool
	RolloutTimeout    time.Duration
	// Cached plans against the clone as it is, without a fetch; not for
	// an execution.
	Cached bool
	Force  bool
	// AllowUnverified releases images that do not pass signature
	// verification; admins alone may ask it.
	AllowUnverified bool
	// Files select the services defined in these repository files.
	Files []string
}

// ReleaseResult is a plan, and for an execution the job that runs it.
type ReleaseResult struct {
	Plan *release.Plan
	Job  *jobs.JobUpdate
}

// Release plans a release for the caller's instance, or queues its
// execution as a job. An execution is planned first, so that a bad spec or
// a plan that no longer matches its checksum fails at once.
func (d *Daemon) Release(ctx context.Context, id auth.Identity, req ReleaseRequest) (*ReleaseResult, error) {
	spec := release.Spec{All: req.All, Image: req.Image, AllLatest: req.AllLatest, User: req.User, Message: req.Message,
		RollbackOnFailure: req.RollbackOnFailure, RolloutTimeout: req.RolloutTimeout, Force: req.Force, Cached: req.Cached && !req.Execute,
		AllowUnverified: req.AllowUnverified, Scope: identity(ctx).Scope}
	if err := refuseAllowUnverified(id, req); err != nil {
		return nil, err
	}
	if err := (release.Spec{All: true, Image: req.Image, AllLatest: req.AllLatest}).Validate(); err != nil {
		return nil, err
	}
	if err := checkUser(req.User); err != nil {
		return nil, err
	}
	if err := checkMessage("message", req.Message); err != nil {
		return nil, err
	}
	if err := d.checkRolloutTimeout(req.RolloutTimeout); err != nil {
		return nil, err
	}
	if req.All && (len(req.Services) > 0 || len(req.Files) > 0) {
		return nil, fluxerr.New(fluxerr.User, errors.New("give services or files, or all, not both"), "")
	}
	resolveAll := func(names []string) ([]platform.ID, error) {
		var ids []platform.ID
		for _, n := range names {
			s, err := d.resolveFresh(ctx, n)
			if err != nil {
				return nil, err
			}
			ids = append(ids, s.ID)
		}
		return ids, nil
	}
	var err error
	if spec.Services, err = resolveAll(req.Services); err != nil {
		return nil, err
	}
	if spec.Exclude, err = resolveAll(req.Exclude); err != nil {
		return nil, err
	}
	for _, f := range req.Files {
		ids, err := d.servicesInFile(ctx, f)
		if err != nil {
			return nil, err
		}
		spec.Services = append(spec.Services, ids...)
	}
	if isBareTag(req.Image) {
		if spec.Image, err = d.imageForTag(ctx, spec.Services, req.Image); err != nil {
			return nil, err
		}
	}
	plan, err := d.deps.Releaser.Plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	res := &ReleaseResult{Plan: plan}
	if !req.Execute {
		return res, nil
	}
	if req.Checksum != "" && req.Checksum != plan.Checksum {
		return nil, fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("the plan you confirmed no longer matches: %s", d.deps.Releaser.WhatChanged(req.Checksum, plan)),
			"Git, the registry or the cluster changed since you saw the plan. Nothing was changed; look at the new plan and confirm it again.")
	}
	if plan.Updates() == 0 {
		return res, nil
	}
	d.invalidate()
	job, err := d.deps.Jobs.Enqueue(ctx, id.Instance, spec, plan.Checksum)
	if err != nil {
		return nil, err
	}
	res.Job = &job
	return res, nil
}

// refuseAllowUnverified refuses --allow-unverified to any role but
// admin: it releases what the verification config was written to keep
// out, which --force (a deployer's) does not.
func refuseAllowUnverified(id auth.Identity, req ReleaseRequest) error {
	if !req.AllowUnverified || id.Allows(auth.Admin) {
		return nil
	}
	return fluxerr.New(fluxerr.Forbidden, fmt.Errorf("--allow-unverified needs the admin role; your token's role is %s", id.Role),
		"It releases images that do not pass signature verification, which the verification config (fluxd --verify-config) was written to keep out. "+
			"Sign the image with a key the config names (cosign sign --key ...), or release an image that verifies ('release --dry-run' shows each image's verification); "+
			"or ask an admin to release it with --allow-unverified, which the commit and history record. Nothing was planned or queued.")
}

// checkRolloutTimeout refuses a rollout timeout above the daemon's cap:
// jobs run one at a time for every instance, so a job waiting on its
// rollout holds every other instance's releases.
func (d *Daemon) checkRolloutTimeout(t time.Duration) error {
	limit := d.cfg.MaxRolloutTimeout
	if limit <= 0 {
		limit = DefaultMaxRolloutTimeout
	}
	if t < 0 {
		return fluxerr.New(fluxerr.User, fmt.Errorf("the rollout timeout %v is negative", t), "Give a rollout timeout in seconds, or none for fluxd's default (--rollout-timeout).")
	}
	if t > limit {
		return fluxerr.New(fluxerr.User, fmt.Errorf("the rollout timeout %v is longer than this fluxd allows (%v)", t, limit),
			"Release jobs run one at a time for everyone, so a long rollout wait holds every other release. Ask for at most "+limit.String()+", or none for fluxd's default; an operator sets the cap with --max-rollout-timeout. Nothing was queued.")
	}
	return nil
}

// HistoryFilter narrows a History query.
type HistoryFilter func(*history.Query)

// HistoryType keeps the events of one type.
func HistoryType(t string) HistoryFilter {
	return func(q *history.Query) { q.Type = history.Type(t) }
}

// HistoryUser keeps the events of users whose name contains user.
func HistoryUser(user string) HistoryFilter {
	return func(q *history.Query) { q.User = user }
}

// HistoryBetween keeps the events that ended in [since, until); a zero
// time leaves that side open.
func HistoryBetween(since, until time.Time) HistoryFilter {
	return func(q *history.Query) { q.Since, q.Until = since, until }
}

// History returns the caller's instance's events, newest first. A service
// that does not exist is NotFound; one with no events has an empty list.
func (d *Daemon) History(ctx context.Context, id auth.Identity, service string, limit int, filters ...HistoryFilter) ([]history.Event, error) {
	if limit > maxHistoryLimit {
		// fluxd's own clients take answers of up to MaxAnswerBytes; a
		// limit without bound let any viewer make fluxd hold a history
		// of any size several times over.
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("--limit %d is more events than one call answers (at most %d)", limit, maxHistoryLimit),
			"Ask for fewer, and narrow with --since and --until, --service, --type or --user.")
	}
	q := history.Query{Limit: limit}
	for _, f := range filters {
		f(&q)
	}
	if q.Type != "" && !slices.Contains(history.Types, q.Type) {
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("there is no event type %q", q.Type), fmt.Sprintf("The types are: %v.", history.Types))
	}
	if service != "" {
		svc, err := d.resolve(ctx, service)
		if err != nil {
			return nil, err
		}
		q.Service = svc.ID.String()
	}
	if identity(ctx).Scope != nil && q.Service == "" {
		// Some events will be out of scope: read more, keep limit.
		q.Limit = min(max(limit, 100)*5, 1000)
	}
	evs, err := d.deps.History.Events(ctx, id.Instance, q)
	if err != nil {
		return nil, fmt.Errorf("reading history: %w", err)
	}
	if evs, err = d.withSyncEvents(ctx, evs, q); err != nil {
		return nil, err
	}
	if evs, err = d.scopedEvents(ctx, evs); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	return evs[:min(len(evs), limit)], nil
}

// maxHistoryLimit is the most events one History call answers.
const maxHistoryLimit = 10000

// PolicyUpdate is a change of a service's policies; nil fields are left
// alone. Tags maps containers to filters; "*" clears one.
type PolicyUpdate struct {
	Automated, Locked *bool
	LockMessage       string
	TagAll, TagOrder  *string
	TagPrerelease     *bool
	Tags              map[string]string
	User              string
}

// historyType names the change for history. Automating and locking (or
// their undoing) name the change even when tag filters change with them,
// so `history --type automate` finds an automation that set a filter; the
// filters are said in the message. A change of both, or of filters alone,
// is a general policy change.
func (u PolicyUpdate) historyType() history.Type {
	switch {
	case u.Automated != nil && u.Locked != nil:
		return history.Policy
	case u.Automated != nil:
		return map[bool]history.Type{true: history.Automate, false: history.Deautomate}[*u.Automated]
	case u.Locked != nil:
		return map[bool]history.Type{true: history.Lock, false: history.Unlock}[*u.Locked]
	}
	return history.Policy
}

// SetPolicy changes a service's policy annotations in git, in one commit,
// after checking every pattern: a bad one changes nothing.
func (d *Daemon) SetPolicy(ctx context.Context, id auth.Identity, name string, u PolicyUpdate) (string, error) {
	if err := checkUser(u.User); err != nil {
		return "", err
	}
	if err := checkMessage("lock message", u.LockMessage); err != nil {
		return "", err
	}
	set, err := release.FilterAnnotations(u.TagAll, u.Tags, u.TagOrder, u.TagPrerelease)
	if err != nil {
		return "", fluxerr.New(fluxerr.User, err, "Filters are glob:PATTERN, regex:PATTERN or semver:RANGE (e.g. semver:~1.2, semver:minor); \"*\" clears one. Nothing was committed.")
	}
	if u.Automated == nil && u.Locked == nil && len(set) == 0 {
		return "", fluxerr.New(fluxerr.User, errors.New("no policy change given"),
			"Say what to change: --automate/--deautomate, --lock -m MSG/--unlock, --tag-all PATTERN, --tag CONTAINER=PATTERN, --tag-order or --tag-prerelease.")
	}
	svc, err := d.resolveInGit(ctx, name)
	if err != nil {
		return "", err
	}
	if !svc.InGit {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("%s is only in the cluster, not in git", svc.ID),
			"fluxd keeps policies as annotations on the workload in git; add its manifest to the repository first.")
	}
	if len(u.Tags) > 0 {
		have := map[string]bool{}
		var names []string
		for _, c := range svc.Containers {
			have[c.Name] = true
			names = append(names, c.Name)
		}
		for c := range u.Tags {
			if !have[c] {
				return "", fluxerr.New(fluxerr.User, fmt.Errorf("%s has no container %q", svc.ID, c),
					"Its containers are: "+strings.Join(names, ", ")+". Use --tag-all for a filter on every container. Nothing was committed.")
			}
		}
	}
	if u.Automated != nil {
		if *u.Automated {
			set[release.AnnotationAutomated] = "true"
			set[release.AnnotationAutomatedBy] = id.Instance
		} else {
			// Removed, like the lock's annotations: no "false" left behind.
			set[release.AnnotationAutomated] = ""
			set[release.AnnotationAutomatedBy] = ""
		}
	}
	if u.Locked != nil {
		if *u.Locked {
			set[release.AnnotationLocked] = "true"
			set[release.AnnotationLockMessage] = u.LockMessage
			set[release.AnnotationLockedBy] = u.User
			set[release.AnnotationLockedAt] = time.Now().UTC().Format(time.RFC3339)
		} else {
			set[release.AnnotationLocked] = ""
			set[release.AnnotationLockMessage] = ""
			set[release.AnnotationLockedBy] = ""
			set[release.AnnotationLockedAt] = ""
		}
	}
	// The next listing shows the change: git is read again before this
	// returns (below), not on the listing's time.
	defer func() {
		if _, err := d.readManifestsNow(ctx); err != nil {
			d.invalidate()
		}
	}()
	msg := ""
	if u.Locked != nil && *u.Locked {
		msg = u.LockMessage
	}
	// Filter changes say what they set, for history.
	var filters []string
	for k, v := range set {
		if k == release.AnnotationTagAll || k == release.AnnotationTagOrder || k == release.AnnotationTagPrerelease || strings.HasPrefix(k, release.AnnotationTagPrefix) {
			if v == "" {
				v = "*"
			}
			filters = append(filters, strings.TrimPrefix(k, "fluxd.io/")+"="+v)
		}
	}
	sort.Strings(filters)
	// A change of several kinds is recorded as "policy": say each.
	if u.historyType() == history.Policy {
		if u.Automated != nil {
			filters = append([]string{map[bool]string{true: "automated", false: "deautomated"}[*u.Automated]}, filters...)
		}
		if u.Locked != nil {
			filters = append([]string{map[bool]string{true: "locked", false: "unlocked"}[*u.Locked]}, filters...)
		}
	}
	if len(filters) > 0 {
		msg = strings.TrimSpace(msg + " " + strings.Join(filters, " "))
	}
	commit, err := d.deps.Releaser.SetPolicy(ctx, id.Instance, release.PolicyChange{Service: svc.ID, Set: set, Type: u.historyType(), User: u.User, Message: msg})
	if err == nil && d.deps.Automator != nil {
		// A policy change re-evaluates the service at once.
		d.deps.Automator.Kick()
	}
	return commit, err
}

// servicesInFile returns the workloads defined in a repository file.
func (d *Daemon) servicesInFile(ctx context.Context, file string) ([]platform.ID, error) {
	clean := filepath.Clean(file)
	if file == "" || filepath.IsAbs(file) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("--file %q is not a path inside the repository", file),
			"Give the path relative to the repository's root, as 'git ls-files' shows it, e.g. deploy/app.yaml.")
	}
	find := func(m *gitrepo.Manifests) []platform.ID {
		var ids []platform.ID
		sc := identity(ctx).Scope
		for id, def := range m.Workloads {
			if def.File == clean && sc.Contains(id.Namespace, def.File) {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, platform.ID.Compare)
		return ids
	}
	m, err := d.readManifests(ctx)
	if err != nil {
		return nil, err
	}
	if ids := find(m); len(ids) > 0 {
		return ids, nil
	}
	if m, err = d.readManifestsNow(ctx); err != nil {
		return nil, err
	}
	if ids := find(m); len(ids) > 0 {
		return ids, nil
	}
	return nil, fluxerr.New(fluxerr.Missing, fmt.Errorf("no workload is defined in %s", clean),
		"The file does not exist under fluxd's --git-path, or defines no Deployment, StatefulSet, DaemonSet or CronJob.")
}

// The image-notification pipeline asks more of Deps.Images and
// Deps.Automator where they offer it (registry/oci's Client and
// automator's Automator do; cmd/fluxd asserts it):

// TagRefresher is an ImageLister that can read a repository's tag list
// alone, now, without any image's metadata.
type TagRefresher interface {
	RefreshTags(ctx context.Context, repository string) ([]string, error)
}

// ImageRefresher is an ImageLister that can read a repository again now,
// its mutable tags checked whatever their re-check interval.
type ImageRefresher interface {
	Refresh(ctx context.Context, repository string) ([]registry.Image, error)
}

// NotifiedAutomation is an Automation whose kick after a notification
// times the release it leads to.
type NotifiedAutomation interface {
	Notified()
}

// Notify refreshes the repository of image (a bare repository or one with
// a tag) at once, and wakes the automator. It returns the repository and
// how many tags it has now.
func (d *Daemon) Notify(ctx context.Context, _ auth.Identity, image string) (string, int, error) {
	ref, err := registry.ParseRef(image)
	if err != nil {
		return "", 0, fluxerr.New(fluxerr.User, err, "Give a repository such as registry.example/team/app, with or without a tag.")
	}
	if err := d.checkNotifyScope(ctx, ref); err != nil {
		return "", 0, err
	}
	if err := d.watched(ctx, ref.Repository); err != nil {
		return "", 0, err
	}
	tags, err := d.notifyRefresh(ctx, ref.Repository)
	if err != nil {
		return "", 0, err
	}
	if tag := ref.Tag; tag != "" && registry.HasTag(image) && !slices.Contains(tags, tag) {
		if done, ok := d.tagWaits.begin(ref.Repository, tag, time.Now()); ok {
			tags, err = d.awaitNotifiedTag(ctx, ref.Repository, tag)
			done(err == nil && slices.Contains(tags, tag))
			if err != nil {
				return "", 0, err
			}
		}
	}
	n := len(tags)
	if a, ok := d.deps.Automator.(NotifiedAutomation); ok {
		a.Notified() // a kick that times the release it leads to
	} else if d.deps.Automator != nil {
		d.deps.Automator.Kick()
	}
	d.log.Info("image notification: repository refreshed", "repository", ref.Repository, "tags", n)
	if d.onNotify != nil {
		d.onNotify(ref.Repository, n)
	}
	return ref.Repository, n, nil
}

// notifiedTagWait is how long a notification's refresh reads the tag
// list again for the tag it named: 0.1 s, doubling, at most 2 s a wait,
// about 5 s in all.
var notifiedTagWait = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6, Cap: 2 * time.Second}

// tagWaits bounds the waits for notified tags: a sender that keeps
// naming tags that never show (a typo, a deleted tag, or someone holding
// the webhook secret) must not keep webhook workers and NotifyImage calls
// waiting. At most maxTagWaits wait at once, and a (repository, tag) given
// up on is not waited for again for tagGiveUpFor; the others read once.
type tagWaits struct {
	mu      sync.Mutex
	waiting int
	givenUp map[string]time.Time
}

const (
	maxTagWaits  = 2
	tagGiveUpFor = 10 * time.Minute
	// maxGivenUp bounds the pairs remembered; past it, no tag is waited for
	// until the oldest expire.
	maxGivenUp = 1000
)

// begin says whether to wait for tag now; done, called after, ends the
// wait and says whether the tag showed.
func (w *tagWaits) begin(repository, tag string, now time.Time) (done func(found bool), ok bool) {
	key := repository + ":" + tag
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, at := range w.givenUp {
		if now.Sub(at) > tagGiveUpFor {
			delete(w.givenUp, k)
		}
	}
	if _, recent := w.givenUp[key]; recent || w.waiting >= maxTagWaits || len(w.givenUp) >= maxGivenUp {
		return nil, false
	}
	w.waiting++
	return func(found bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.waiting--
		if !found {
			if w.givenUp == nil {
				w.givenUp = map[string]time.Time{}
			}
			w.givenUp[key] = now
		}
	}, true
}

// awaitNotifiedTag reads the tag list of a notified repository again
// until it shows tag, for a while. The CNCF distribution registry sends a
// manifest push's event when the manifest is stored, before it links the
// tag to it: a refresh that follows the event at once can list the
// repository without the tag it was told of (TestWebhookBurstReleasesTheLastPush
// saw the burst's last tag missed so, and released only at the next scan).
// Found or not, it returns the last list read; not found, it says so.
//
// The waits read the tag list alone where the client can (RefreshTags):
// where the repository's users need metadata, notifyRefresh is a forced
// scan (every mutable tag checked), and a tag listed but left out of a
// scan (its metadata unreadable: an artifact, a signature) would cost one
// at every read. Once the list shows the tag, one scan reads it.
func (d *Daemon) awaitNotifiedTag(ctx context.Context, repository, tag string) ([]string, error) {
	var tags []string
	var readErr error
	found := false
	if d.tagWait.Steps == 0 {
		return d.notifyRefresh(ctx, repository)
	}
	read := d.notifyRefresh
	listOnly := false
	if r, ok := d.deps.Images.(TagRefresher); ok {
		read, listOnly = r.RefreshTags, true
	}
	err := wait.ExponentialBackoffWithContext(ctx, d.tagWait, func(ctx context.Context) (bool, error) {
		tags, readErr = read(ctx, repository)
		found = readErr == nil && slices.Contains(tags, tag)
		return found || readErr != nil, nil
	})
	if readErr != nil {
		return nil, readErr
	}
	if !found {
		d.log.Warn("image notification: the registry told of a tag its tag list does not show; the next scan will find it if it appears",
			"repository", repository, "tag", tag, "error", err)
		return tags, nil
	}
	if listOnly && d.needsMetadata(ctx, repository) {
		return d.notifyRefresh(ctx, repository)
	}
	return tags, nil
}

// notifyRefresh refreshes a notified repository as its users need it:
// when every container running it orders its tags by version,
// alphabetically or numerically (no filter needing build times), the tag
// list alone, as list-images and plans read it; otherwise every tag,
// mutable ones checked now whatever their re-check interval. It returns
// the repository's tags.
func (d *Daemon) notifyRefresh(ctx context.Context, repository string) ([]string, error) {
	if r, ok := d.deps.Images.(TagRefresher); ok && !d.needsMetadata(ctx, repository) {
		return r.RefreshTags(ctx, repository)
	}
	list := d.deps.Images.Images
	if r, ok := d.deps.Images.(ImageRefresher); ok {
		list = r.Refresh
	}
	imgs, err := list(ctx, repository)
	if err != nil {
		return nil, err
	}
	tags := make([]string, 0, len(imgs))
	for _, img := range imgs {
		tags = append(tags, img.Tag)
	}
	return tags, nil
}

// needsMetadata reports whether some container running repository needs
// its images' build times (its order is by time, or its filter needs
// them, or cannot be read), or the services cannot be known (in doubt).
func (d *Daemon) needsMetadata(ctx context.Context, repository string) bool {
	svcs, err := d.services(ctx)
	if err != nil {
		return true
	}
	for _, s := range svcs {
		for _, c := range s.Containers {
			ref, err := registry.ParseRef(c.Image)
			if err != nil || ref.Repository != repository {
				continue
			}
			f, ferr := containerFilter(s.def, s.annotations, c.Name, ref)
			if ferr != nil || f.NeedsMetadata() || f.Order == "" || pinnedMutable(s.annotations, c.Name, ref) {
				return true
			}
		}
	}
	return false
}

// dedupe is s without repeats, in first-seen order.
func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
