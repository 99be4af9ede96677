package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/syncer"
)

// Cluster is what the daemon needs from the cluster.
type Cluster interface {
	Workloads(ctx context.Context) ([]platform.Workload, error)
}

// Releaser plans and executes releases, and reads the manifests.
type Releaser interface {
	Plan(ctx context.Context, spec release.Spec) (*release.Plan, error)
	Execute(ctx context.Context, instance string, spec release.Spec, typ history.Type, opts release.ExecOptions) (*release.Result, error)
	Manifests(ctx context.Context) (string, *gitrepo.Manifests, error)
	SetPolicy(ctx context.Context, instance string, ch release.PolicyChange) (string, error)
	WhatChanged(confirmed string, now *release.Plan) string
}

// Jobs queues and runs release executions.
type Jobs interface {
	Enqueue(ctx context.Context, instance string, spec release.Spec, checksum string) (jobs.JobUpdate, error)
	Get(ctx context.Context, instance, id string) (jobs.JobUpdate, error)
	List(ctx context.Context, instance string, limit int) ([]jobs.JobUpdate, error)
	Cancel(ctx context.Context, instance, id string) (jobs.JobUpdate, error)
	Watch(ctx context.Context, instance, id string) (<-chan jobs.JobUpdate, error)
}

// Automation is the automator as the daemon sees it: told when there may
// be work, and asked where each automated service is.
type Automation interface {
	Kick()
	Statuses() map[platform.ID]automator.Status
}

// ImageLister lists a repository's images, newest first.
type ImageLister interface {
	Images(ctx context.Context, repository string) ([]registry.Image, error)
}

// History reads recorded events.
type History interface {
	Events(ctx context.Context, instance string, q history.Query) ([]history.Event, error)
}

// Deps are the daemon's collaborators.
type Deps struct {
	Cluster  Cluster
	Releaser Releaser
	Images   ImageLister
	History  History
	// Automator, if set, is kicked after a policy change or notification
	// and reports automation states; nil on a follower.
	Automator Automation
	Jobs      Jobs
	// Git, if set, reports how the git remote has answered lately; a
	// failing remote makes the health service say NOT_SERVING.
	Git GitRemote
	// SSHKey, if set, is the SSH key fluxd reaches its git remote with.
	SSHKey SSHKey
	// Sync, if set, is the continuous sync: list-services shows each
	// service's state against git, and the Sync call runs it.
	Sync Syncing
	// Ready, if set, says why fluxd cannot serve just now (the cluster's
	// caches not synced, the database not answering), or nil. The health
	// service reports it, without a token.
	Ready func(ctx context.Context) error
	// Promotions, if set, is the promotion loop (promotion.Controller):
	// fluxctl stages, bundles, promote, approve and stages resume go to
	// it. Nil when fluxd runs no pipelines: those calls answer
	// Unimplemented, saying so.
	Promotions Promotions
}

// SSHKey reports the public half of the key fluxd reaches an SSH git
// remote with; false when the remote is not an SSH one.
type SSHKey interface {
	DeployKey() (gitrepo.DeployKey, bool)
}

// GitRemote reports the git remote's state.
type GitRemote interface {
	Status() gitrepo.RemoteStatus
}

// Daemon implements fluxd's operations over domain types. Every operation
// takes the caller's identity, so that records are kept per instance.
type Daemon struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	mu           sync.Mutex // guards the fields below
	manifests    *gitrepo.Manifests
	manifestsRev string // the revision manifests were read from
	readAt       time.Time
	refreshing   chan struct{} // closed when the background read ends
	refreshSince time.Time     // when it began
	readErr      error         // the last read's error, nil after a success
	moved        uint64        // counts GitMoved calls: a read begun before the last one is stale
	gen          uint64        // counts stored copies, so an older read never replaces a newer one

	refreshes singleflight.Group // registry refreshes by repository
	pageReads singleflight.Group // list-images page reads by repository and tags

	ready    readiness // Ready's answer, shared for a second
	onNotify func(repository string, tags int)
	view     viewCache // the joined list of services, while nothing changed
	// tagWait is how a notification's refresh waits for the tag it named
	// (awaitNotifiedTag); Steps 0 reads once.
	tagWait  wait.Backoff
	tagWaits tagWaits
	// kept are the services' answer forms, reused by the next view for
	// the services that did not change (keptservice.go).
	kept keptServices
	// policies are policyOf's answers for the manifests of the last view.
	policies policyCache
}

// generational is a source that says when what it reports may have
// changed (platform/kube's informers, the automator).
type generational interface{ Generation() uint64 }

// viewCache keeps the joined list of services while the cluster's
// workloads, the manifests read from git and the automator's states stay
// the same: building it costs milliseconds of CPU for 1,000 workloads,
// and list-services is called often (dashboards, scripts, fluxctl).
type viewCache struct {
	mu       sync.Mutex
	key      viewKey
	services []Service
	// building is the build under way, if any.
	building *viewBuild
	// built counts the views built; answers are view answersOf's
	// list-services answers (see answer.go), by scope and namespace.
	built, answersOf uint64
	// builtAt is when the view was built, cost how long that took (see
	// viewlag.go).
	builtAt time.Time
	cost    time.Duration
	answers map[answerKey]*keptAnswer
	// byFirst finds an answer by the address of its first service's
	// slot, as the codec is handed the answer's slice: each answer's
	// slice is its own, while the services in it are kept ones that
	// answers of other scopes and namespaces share (keptservice.go).
	byFirst map[**fluxdv1.Service]*keptAnswer
}

// viewKey is the generations a view was built from.
type viewKey struct {
	cluster, automator uint64
	// jobs counts the jobs that ended (endedJobs): a release's rollout
	// is a change of the cluster that must show at once (viewlag.go).
	jobs      uint64
	manifests *gitrepo.Manifests
	sync      *syncer.Report // the last sync, whose states the view shows
}

// OnNotify sets a function told of every image notification fluxd acted
// on (webhook or NotifyImage): the web page shows them as they come. It
// must not block. Set it before serving.
func (d *Daemon) OnNotify(f func(repository string, tags int)) { d.onNotify = f }

// New returns a Daemon. cfg must have passed Validate.
func New(cfg Config, deps Deps, log *slog.Logger) *Daemon {
	return &Daemon{cfg: cfg, deps: deps, log: log.With("component", "daemon"), tagWait: notifiedTagWait}
}

// Service is a workload as fluxd sees it: in the cluster, in git, or both.
type Service struct {
	ID         platform.ID
	Containers []platform.Container
	Status     string
	Replicas   platform.Replicas
	InGit      bool
	InCluster  bool
	Automated  bool
	Locked     bool
	LockMsg    string
	// Filters maps containers to their tag filters ("*": all containers);
	// TagOrder orders glob and regex filters when not by build time.
	Filters    map[string]string
	TagOrder   string
	Prerelease bool
	// Automation is the automator's state for an automated service.
	Automation *automator.Status
	// Warnings are policy problems to fix.
	Warnings []string
	// Goals maps containers to the image git defines, for those whose
	// running image differs from it.
	Goals map[string]string
	// SyncState is "synced", "drifted" or "failed" when fluxd syncs and
	// the service is in git; SyncDetail says how it drifted or failed.
	SyncState, SyncDetail string
	// def is the service's definition in git, nil when it has none.
	def *gitrepo.Definition
	// GitImages maps each container to the image git names for it.
	GitImages map[string]string

	annotations map[string]string
}

// Services lists every workload in the cluster or in git, sorted by ID,
// optionally in one namespace. The cluster and git are shared by all
// instances; what differs per instance is the history kept about them.
func (d *Daemon) Services(ctx context.Context, _ auth.Identity, namespace string) ([]Service, error) {
	all, err := d.services(ctx)
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		return all, nil
	}
	var out []Service
	for _, s := range all {
		if s.ID.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

// services returns the joined view, rebuilt only when the cluster, git
// or the automator changed since it was built (when they say so: a
// source that cannot say makes every call rebuild it). The view is shared:
// callers must not modify it.
func (d *Daemon) services(ctx context.Context) ([]Service, error) {
	svcs, _, err := d.servicesBuilt(ctx)
	return svcs, err
}

// servicesBuilt is services with the count of the view it returns (0: a
// view not kept). It is the one place a caller's scope applies: a scoped
// caller (identity in ctx) gets only the services in its scope, and
// every call that lists, names or releases services reads them here.
func (d *Daemon) servicesBuilt(ctx context.Context) ([]Service, uint64, error) {
	svcs, built, err := d.viewBuilt(ctx)
	if sc := identity(ctx).Scope; sc != nil && err == nil {
		return inScope(sc, svcs), 0, nil
	}
	return svcs, built, err
}

// viewBuilt is servicesBuilt for everyone, whatever the caller's scope.
func (d *Daemon) viewBuilt(ctx context.Context) ([]Service, uint64, error) {
	cg, cok := d.deps.Cluster.(generational)
	var ag generational = zeroGen{}
	aok := true
	if d.deps.Automator != nil {
		ag, aok = d.deps.Automator.(generational)
	}
	if !cok || !aok {
		m, err := d.readManifests(ctx)
		if err != nil {
			return nil, 0, err
		}
		svcs, err := d.buildServices(ctx, m)
		return svcs, 0, err
	}
	// The generations are read before the sources: a change while the
	// view is built makes the next call build it again.
	key := viewKey{cluster: cg.Generation(), automator: ag.Generation(), jobs: d.jobsEnded()}
	if d.deps.Sync != nil {
		key.sync = d.deps.Sync.Last()
	}
	m, err := d.readManifests(ctx)
	if err != nil {
		return nil, 0, err
	}
	key.manifests = m
	for {
		d.view.mu.Lock()
		// A view as new as the caller's generations, or newer, answers:
		// a caller that read them just before a change is as well served
		// by the view of that change.
		if d.view.services != nil && (d.view.key.covers(key) || d.view.key.coversButCluster(key) && d.view.young(time.Now())) {
			svcs, built := d.view.services, d.view.built
			d.view.mu.Unlock()
			return svcs, built, nil
		}
		// A view only the cluster moved past, and costly to build, still
		// answers while the next is built behind it: under churn, every
		// caller that came as it aged would otherwise wait for the build
		// (BenchmarkScale at 10,000 workloads: list-services' p99 was a
		// build under load). Its age past young is then at most one
		// build (viewlag.go).
		if d.view.services != nil && d.view.key.coversButCluster(key) && d.view.cost >= minLagCost && time.Since(d.view.builtAt) < maxStaleView {
			if d.view.building == nil {
				b := &viewBuild{key: key, done: make(chan struct{})}
				d.view.building = b
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundBuildTimeout)
				go func() {
					defer cancel()
					_, _, _ = d.buildView(bctx, b, m)
				}()
			}
			svcs, built := d.view.services, d.view.built
			d.view.mu.Unlock()
			return svcs, built, nil
		}
		// Callers that find the view stale at once (each change, under
		// load) share one build of it rather than each joining 1,000
		// services.
		if b := d.view.building; b != nil && b.key.covers(key) {
			d.view.mu.Unlock()
			select {
			case <-b.done:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
			if b.err == nil {
				return b.services, b.built, nil
			}
			// Failed (perhaps only because its caller went away): look
			// again, and build it if it is still missing.
			continue
		}
		b := &viewBuild{key: key, done: make(chan struct{})}
		d.view.building = b
		d.view.mu.Unlock()
		return d.buildView(ctx, b, m)
	}
}

// maxStaleView bounds the age of a view that answers while the next is
// built behind it: where those builds keep failing (the cluster's caches
// cannot be read), a caller past it builds the view itself and is told
// why, rather than served an old view for good. A build that succeeds
// takes far less (10,000 workloads: about a second).
var maxStaleView = 30 * time.Second

// backgroundBuildTimeout bounds a view's build that no caller waits for.
const backgroundBuildTimeout = time.Minute

// buildView builds b (set as the view's building, under its lock, by
// the caller) from m, keeps it as the view unless a newer one was kept
// meanwhile, and tells those waiting for it.
func (d *Daemon) buildView(ctx context.Context, b *viewBuild, m *gitrepo.Manifests) ([]Service, uint64, error) {
	key := b.key
	start := time.Now()
	svcs, err := d.buildServices(ctx, m)
	cost := time.Since(start)
	var answers map[answerKey]*keptAnswer
	var byFirst map[**fluxdv1.Service]*keptAnswer
	d.view.mu.Lock()
	next := d.view.built + 1
	d.view.mu.Unlock()
	if err == nil {
		answers, byFirst = d.nextAnswers(svcs, next)
	}
	d.view.mu.Lock()
	b.err = err
	if d.view.building == b {
		d.view.building = nil
	}
	if err != nil {
		d.view.mu.Unlock()
		close(b.done)
		return nil, 0, err
	}
	if old := d.view.key; d.view.services != nil && (old.cluster > key.cluster || old.automator > key.automator || old.jobs > key.jobs) {
		// A caller that read the generations before a change ended
		// after the view of the change was kept: answer, keep the
		// newer.
		b.services = svcs
		d.view.mu.Unlock()
		close(b.done)
		return svcs, 0, nil
	}
	d.view.built++
	if answers != nil && d.view.built == next {
		d.view.answers, d.view.byFirst, d.view.answersOf = answers, byFirst, next
	}
	d.view.key, d.view.services = key, svcs
	d.view.builtAt, d.view.cost = time.Now(), cost
	built := d.view.built
	b.services, b.built = svcs, built
	d.view.mu.Unlock()
	close(b.done)
	return svcs, built, nil
}

// viewBuild is a build of the view under way, which callers wanting a
// view of the same key wait for.
type viewBuild struct {
	key  viewKey
	done chan struct{}
	// set before done is closed: the view built (built 0: not kept) or
	// why it could not be.
	services []Service
	built    uint64
	err      error
}

// covers says a view of key k answers a caller that read the generations
// of o: the same sources, as new or newer.
func (k viewKey) covers(o viewKey) bool {
	return k.manifests == o.manifests && k.sync == o.sync && k.cluster >= o.cluster && k.automator >= o.automator && k.jobs >= o.jobs
}

// serviceProtos is Services as the API sends them, kept with the view
// per caller's scope and namespace (listAnswer): converting 1,000
// services costs as much as joining them. The protos are shared between
// answers: nothing may modify them.
func (d *Daemon) serviceProtos(ctx context.Context, namespace string) ([]*fluxdv1.Service, error) {
	a, err := d.listAnswer(ctx, namespace)
	if err != nil {
		return nil, err
	}
	a.asked.Store(true)
	keepAnswer(ctx, a)
	return a.protos, nil
}

// maxKeptNamespaces bounds the answers (per scope and namespace) kept
// with a view; only namespaces that hold services are kept, so this binds
// only on a cluster with more namespaces (or scopes) than this, whose
// further answers are converted on each call.
const maxKeptNamespaces = 256

type zeroGen struct{}

func (zeroGen) Generation() uint64 { return 0 }

// buildServices joins the cluster's workloads, the manifests in git and
// the automator's states.
func (d *Daemon) buildServices(ctx context.Context, m *gitrepo.Manifests) ([]Service, error) {
	ws, err := d.deps.Cluster.Workloads(ctx)
	if err != nil {
		return nil, err
	}
	// Sized once: growing a map of 10,000 rehashed it a dozen times.
	byID := make(map[platform.ID]*Service, max(len(ws), len(m.Workloads)))
	order := make([]platform.ID, 0, max(len(ws), len(m.Workloads)))
	for _, w := range ws {
		byID[w.ID] = &Service{ID: w.ID, Containers: w.Containers, Status: w.Status, Replicas: w.Replicas, InCluster: true}
		order = append(order, w.ID)
	}
	for id, def := range m.Workloads {
		s, ok := byID[id]
		if !ok {
			s = &Service{ID: id, Status: "not in cluster"}
			for _, c := range def.Containers {
				s.Containers = append(s.Containers, platform.Container{Name: c.Name, Image: c.Image, Init: c.Init})
			}
			byID[id] = s
			order = append(order, id)
		}
		s.InGit = true
		s.def = def
		s.Automated = def.Annotations[release.AnnotationAutomated] == "true"
		s.Locked = def.Annotations[release.AnnotationLocked] == "true"
		if s.Locked {
			s.LockMsg = release.LockReason(def.Annotations)
		}
		s.GitImages = map[string]string{}
		for _, c := range def.Containers {
			s.GitImages[c.Name] = c.Image
		}
		s.annotations = def.Annotations
		s.Filters, s.TagOrder, s.Warnings = d.policies.of(m, def)
		s.Prerelease = def.Annotations[release.AnnotationTagPrerelease] == "true"
	}
	if d.deps.Automator != nil {
		for id, st := range d.deps.Automator.Statuses() {
			if s, ok := byID[id]; ok {
				st := st
				s.Automation = &st
				s.Warnings = append(s.Warnings, st.Warnings...)
			}
		}
	}
	d.markUnreleasable(ctx, byID)
	d.syncStates(byID)
	// Sorted as IDs, then copied: sorting the Services themselves moved
	// their whole structs at every swap. Most views hold the services of
	// the view before (a status, an image or the automator's decision
	// changed, not which services there are): its order is then this
	// one's, found with a lookup each rather than a sort.
	if prev := d.previousView(); len(prev) == len(order) && len(order) == len(byID) && sameIDs(prev, byID) {
		for i := range prev {
			order[i] = prev[i].ID
		}
	} else {
		slices.SortFunc(order, platform.ID.Compare)
	}
	out := make([]Service, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

// previousView is the last view kept (sorted by ID), or nil.
func (d *Daemon) previousView() []Service {
	d.view.mu.Lock()
	defer d.view.mu.Unlock()
	return d.view.services
}

// sameIDs says prev, as long as byID, names each of its services once, in
// order: every ID in byID, each after the one before.
func sameIDs(prev []Service, byID map[platform.ID]*Service) bool {
	for i := range prev {
		if _, ok := byID[prev[i].ID]; !ok || i > 0 && prev[i-1].ID.Compare(prev[i].ID) >= 0 {
			return false
		}
	}
	return true
}

// policyCache keeps policyOf's answer for each definition of one read
// of git (a revision's definitions are shared, and never change): a view
// rebuilt for a change of the cluster or the automator parsed every
// workload's filters again, a third of its build at 10,000 workloads
// (BenchmarkScale's profile under list-services load).
type policyCache struct {
	mu    sync.Mutex
	m     *gitrepo.Manifests
	byDef map[*gitrepo.Definition]policyAnswer
}

type policyAnswer struct {
	filters  map[string]string
	order    string
	warnings []string
}

// of is policyOf(def), def one of m's definitions. The filters are
// shared between views (nothing modifies them); the warnings are clipped,
// so that a view appending to them copies them.
func (p *policyCache) of(m *gitrepo.Manifests, def *gitrepo.Definition) (map[string]string, string, []string) {
	p.mu.Lock()
	if p.m != m {
		p.m, p.byDef = m, make(map[*gitrepo.Definition]policyAnswer, len(m.Workloads))
	}
	a, ok := p.byDef[def]
	p.mu.Unlock()
	if !ok {
		a.filters, a.order, a.warnings = policyOf(def)
		a.warnings = slices.Clip(a.warnings)
		p.mu.Lock()
		if p.m == m {
			p.byDef[def] = a
		}
		p.mu.Unlock()
	}
	return a.filters, a.order, a.warnings
}

// policyOf reads a definition's tag filters, and reports the ones written
// in git that do not parse: they are never silently ignored.
func policyOf(def *gitrepo.Definition) (map[string]string, string, []string) {
	var filters map[string]string
	var warnings []string
	add := func(k, v string) {
		if filters == nil {
			filters = map[string]string{}
		}
		filters[k] = v
	}
	if v := def.Annotations[release.AnnotationTagAll]; v != "" && v != "*" {
		add("*", v)
	}
	if def.Format == gitrepo.FormatSetters {
		if f, err := release.DefinitionFilter(def, ""); err == nil {
			add("*", "ImagePolicy "+f.String())
		}
	}
	for _, c := range def.Containers {
		if v, ok := def.Annotations[release.AnnotationTagPrefix+c.Name]; ok && v != "" && v != "*" {
			add(c.Name, v)
		}
		if _, err := release.DefinitionFilter(def, c.Name); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: invalid policy in git (%s): %v", c.Name, def.File, err))
		}
	}
	warnings = append(warnings, def.Warnings...)
	return filters, def.Annotations[release.AnnotationTagOrder], dedupe(warnings)
}
