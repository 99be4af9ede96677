package automator

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// User is the user automated releases are made as.
const User = "automator"

// Planner is what the automator needs of the release engine.
type Planner interface {
	Manifests(ctx context.Context) (string, *gitrepo.Manifests, error)
	Plan(ctx context.Context, spec release.Spec) (*release.Plan, error)
}

// Jobs is the release job queue: automated releases are jobs like any
// other, listed, watched, cancelled and taken over like them.
type Jobs interface {
	Enqueue(ctx context.Context, instance string, spec release.Spec, checksum string) (jobs.JobUpdate, error)
	Get(ctx context.Context, instance, id string) (jobs.JobUpdate, error)
}

// Config sets the automator's timing.
type Config struct {
	// ShortWait follows a release (default 15s); LongWait follows a check
	// that found nothing to release (default 1m).
	ShortWait, LongWait time.Duration
	// MaxBackoff caps the exponential wait after failures (default 10m);
	// the first retry comes after ShortWait.
	MaxBackoff time.Duration
	// RefusedWait follows a check that found the service is one fluxd
	// will not release (outside --namespaces, or not permitted to patch
	// it): nothing in git changes that, so it is not checked again on
	// every pass, nor woken by notifications (default 10m). A change of
	// its policy in git (a kick from fluxctl) does not wake it either:
	// the binding is what has to change.
	RefusedWait time.Duration
	// DefaultInstance records automated releases of services that name no
	// instance in fluxd.io/automated-by (automated by hand, or by Flux v1's
	// or Keel's annotations) when Instances does not settle it.
	DefaultInstance string
	// Instances, when set, lists the instances the tokens file names with
	// their scopes (nil: unscoped). A service that names no instance is
	// recorded under the one instance whose scope holds it, so that
	// instance's tokens see its automated releases in history; with none
	// or several, under DefaultInstance.
	Instances func() map[string]*auth.Scope
	// Metrics, when set, gets a gauge of services per state.
	Metrics prometheus.Registerer
	// Scopes, when set, gives an instance's scope (nil: unscoped): a
	// service automated by an instance whose scope does not hold it (the
	// scope was narrowed, or the annotation written by hand) is not
	// released, as a locked one is not.
	Scopes func(instance string) *auth.Scope
	// Notices, when set, is told (as a history.UnverifiedSkipped notice,
	// which notify sends as automation.unverified-skipped) of each newer
	// image a check skipped because it does not pass signature
	// verification: once per service and image digest, not every pass.
	Notices Notices
}

// Notices stores a notice for the notification receivers
// (history.Outbox's Notify).
type Notices interface {
	Notify(ctx context.Context, n history.Notice) (int64, error)
}

// State is where a service is in the machine.
type State string

// The states. A new service is Empty; a check (Refreshing) ends in a
// decision: nothing to do (UpToDate until the next check), a release
// (Releasing, until its job ends, then Waiting a short while), or an
// error (Failing, waiting with exponential backoff).
const (
	Empty      State = "empty"
	Refreshing State = "refreshing"
	UpToDate   State = "uptodate"
	Releasing  State = "releasing"
	Waiting    State = "waiting"
	Failing    State = "failing"
)

var allStates = []State{Empty, Refreshing, UpToDate, Releasing, Waiting, Failing}

// waits reports whether a state waits until Next.
func (s State) waits() bool { return s == UpToDate || s == Waiting || s == Failing }

// Status is one automated service's state, for list-services.
type Status struct {
	State State
	// Next is when it is checked again (Waiting, Failing).
	Next time.Time
	// JobID is the release job while Releasing.
	JobID string
	// LastError and Failures say why it is Failing.
	LastError string
	Failures  int
	// Decision is the last decision, e.g. "release app=r/app:1.3".
	Decision string
	// LastCheck is when the service's images were last looked at.
	LastCheck time.Time
	// Warnings are policy problems found by the last check.
	Warnings []string
}

type service struct {
	Status
	id       platform.ID
	instance string
	// recheck is set by a kick during a release: a newer image may have
	// come meanwhile, so the service is checked as soon as the job ends.
	recheck bool
	// gone is set when git no longer automates the service (deautomated,
	// locked, out of scope) while its release job runs: it is forgotten
	// when the job ends, never checked again.
	gone bool
	// refused is set by a check that found fluxd will not release it
	// (release.Refused): it waits RefusedWait, and kicks do not end the
	// wait.
	refused bool
	// toldUnverified are the skipped unverified images (by digest, or
	// image where no digest was read) the receivers were told of.
	toldUnverified map[string]bool
}

// Automator runs the state machines.
type Automator struct {
	cfg   Config
	plans Planner
	jobs  Jobs
	clock clock.Clock
	log   *slog.Logger
	gauge *prometheus.GaugeVec
	// decisions counts the decisions by kind; nil without metrics.
	decisions *prometheus.CounterVec
	// gen counts the changes of Statuses that a pass published; shown
	// is what Statuses said at the last one (guarded by mu).
	gen   atomic.Uint64
	shown map[platform.ID]Status
	// notified is when the oldest notification not yet followed by a
	// release arrived (zero: none), guarded by mu.
	notified time.Time

	mu       sync.Mutex // guards services for Status readers
	services map[platform.ID]*service
	kick     chan struct{}
	wake     atomic.Bool // a kick asked to end the waits
	onChange func()
}

// New returns an Automator.
func New(cfg Config, p Planner, jobs Jobs, clk clock.Clock, log *slog.Logger) *Automator {
	if cfg.ShortWait <= 0 {
		cfg.ShortWait = 15 * time.Second
	}
	if cfg.LongWait <= 0 {
		cfg.LongWait = time.Minute
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Minute
	}
	if cfg.RefusedWait <= 0 {
		cfg.RefusedWait = 10 * time.Minute
	}
	if cfg.DefaultInstance == "" {
		cfg.DefaultInstance = "default"
	}
	a := &Automator{cfg: cfg, plans: p, jobs: jobs, clock: clk, log: log.With("component", "automator"),
		services: map[platform.ID]*service{}, kick: make(chan struct{}, 1)}
	if cfg.Metrics != nil {
		a.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fluxd_automation_services", Help: "Automated services by automator state."}, []string{"state"})
		a.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fluxd_automation_decisions_total",
			Help: "Automator decisions per service checked: release, nothing-newer, filtered-out, skipped or failing."}, []string{"decision"})
		cfg.Metrics.MustRegister(a.gauge, a.decisions)
		for _, d := range []string{"release", "nothing-newer", "filtered-out", "skipped", "failing"} {
			a.decisions.WithLabelValues(d)
		}
	}
	return a
}

// Kick ends every wait (not a failure's backoff) and asks for a pass
// now; a service releasing is checked again as soon as its job ends.
// Kicks coalesce. Notifications and policy changes kick.
func (a *Automator) Kick() {
	a.wake.Store(true)
	a.Poke()
}

// Notified is Kick for an image notification: the release it leads to
// carries the notification's time, for the notification-to-commit metric.
func (a *Automator) Notified() {
	a.mu.Lock()
	if a.notified.IsZero() {
		a.notified = a.clock.Now()
	}
	a.mu.Unlock()
	a.Kick()
}

func (a *Automator) decided(kind string) {
	if a.decisions != nil {
		a.decisions.WithLabelValues(kind).Inc()
	}
}

// Poke asks for a pass now without ending any wait: a job ended.
func (a *Automator) Poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run drives the machines until ctx ends.
func (a *Automator) Run(ctx context.Context) {
	for {
		next := a.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
			if a.wake.Swap(false) {
				a.wakeAll()
			}
		case <-a.clock.After(next):
		}
	}
}

func (a *Automator) wakeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for _, s := range a.services {
		switch {
		case s.refused:
			// Waits out RefusedWait: a notification does not bind RBAC.
		case s.State == Waiting || s.State == UpToDate:
			s.Next = now
		case s.State == Releasing || s.State == Refreshing:
			s.recheck = true
		}
	}
}

// Statuses reports every automated service's state.
func (a *Automator) Statuses() map[platform.ID]Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[platform.ID]Status, len(a.services))
	for id, s := range a.services {
		st := s.Status
		st.Warnings = append([]string(nil), s.Warnings...)
		out[id] = st
	}
	return out
}

// Generation changes whenever Statuses may have: a reader that kept what
// Statuses said may keep it while Generation stays the same.
func (a *Automator) Generation() uint64 { return a.gen.Load() }

// States reports each service's state.
func (a *Automator) States() map[platform.ID]State {
	out := map[platform.ID]State{}
	for id, s := range a.Statuses() {
		out[id] = s.State
	}
	return out
}

// OnChange sets a function called after every pass, when the services'
// states may have changed (the web page's live view). It must not block.
// Set it before Run.
func (a *Automator) OnChange(f func()) { a.onChange = f }

// changed publishes the services' states: when they differ from those
// published last, Generation moves and OnChange is told. A pass that
// changed nothing moves nothing, so that readers keeping what Statuses
// said (the daemon's view) do not rebuild it for nothing.
func (a *Automator) changed() {
	now := a.Statuses()
	a.mu.Lock()
	same := a.shown != nil && maps.EqualFunc(now, a.shown, sameStatus)
	if !same {
		a.shown = now
	}
	a.mu.Unlock()
	if same {
		return
	}
	a.gen.Add(1)
	if a.onChange != nil {
		a.onChange()
	}
}

func sameStatus(x, y Status) bool {
	return x.State == y.State && x.Next.Equal(y.Next) && x.JobID == y.JobID && x.LastError == y.LastError &&
		x.Failures == y.Failures && x.Decision == y.Decision && x.LastCheck.Equal(y.LastCheck) && slices.Equal(x.Warnings, y.Warnings)
}

// Step reads which services are automated, settles releases whose jobs
// ended, checks every service that is due (one plan per instance), queues
// one release job per instance for all the services that need one, and
// returns how long until the next is due.
func (a *Automator) Step(ctx context.Context) time.Duration {
	defer a.changed()
	defer a.observe()
	_, m, err := a.plans.Manifests(ctx)
	if err != nil {
		a.log.Warn("cannot read which services are automated; will retry", "error", err, "in", a.cfg.ShortWait)
		return a.cfg.ShortWait
	}
	a.track(m)
	a.settleJobs(ctx)

	due := map[string][]platform.ID{}
	a.mu.Lock()
	now := a.clock.Now()
	for id, s := range a.services {
		if s.State == Empty || (s.State.waits() && !now.Before(s.Next)) {
			s.State = Refreshing
			due[s.instance] = append(due[s.instance], id)
		}
	}
	a.mu.Unlock()
	if len(due) > 0 {
		// Show the services being checked as refreshing while the
		// pass runs, not only its outcome.
		a.changed()
	}
	instances := make([]string, 0, len(due))
	for inst := range due {
		instances = append(instances, inst)
	}
	sort.Strings(instances)
	for _, inst := range instances {
		ids := due[inst]
		slices.SortFunc(ids, platform.ID.Compare)
		a.tellUnverified(ctx, a.check(ctx, inst, ids))
	}
	return a.nextDue()
}

// track starts machines for newly automated services and forgets the
// ones no longer automated, or locked.
func (a *Automator) track(m *gitrepo.Manifests) {
	automated := map[platform.ID]string{}
	for id, def := range m.Workloads {
		if def.Annotations[release.AnnotationAutomated] != "true" {
			continue
		}
		if def.Annotations[release.AnnotationLocked] == "true" {
			a.mu.Lock()
			_, known := a.services[id]
			a.mu.Unlock()
			if known {
				a.log.Info("decision: "+release.LockReason(def.Annotations)+"; not releasing it", "service", id.String())
			}
			continue
		}
		inst := def.Annotations[release.AnnotationAutomatedBy]
		if inst == "" {
			inst = a.unnamedInstance(id, def, m)
		}
		if a.cfg.Scopes != nil {
			if sc := a.cfg.Scopes(inst); !release.InScope(sc, id, def, m) {
				a.mu.Lock()
				_, known := a.services[id]
				a.mu.Unlock()
				if known { // said once, when it leaves the scope
					a.log.Info("decision: outside the scope of the instance that automated it; not releasing it", "service", id.String(), "instance", inst, "scope", sc.String())
				}
				continue
			}
		}
		automated[id] = inst
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, s := range a.services {
		_, ok := automated[id]
		switch {
		case !ok && s.State != Releasing:
			a.log.Info("decision: no longer automated (or locked); forgetting", "service", id.String(), "state", string(s.State))
			delete(a.services, id)
		case !ok:
			s.gone = true // forgotten once its job ends (settleJobs)
		}
	}
	for id, inst := range automated {
		s, ok := a.services[id]
		if !ok {
			s = &service{id: id, Status: Status{State: Empty}}
			a.services[id] = s
		}
		s.instance, s.gone = inst, false
	}
}

// settleJobs moves services whose release job ended on: to Waiting after
// a success, to Failing after a failure.
func (a *Automator) settleJobs(ctx context.Context) {
	a.mu.Lock()
	type job struct{ instance, id string }
	releasing := map[job][]*service{}
	for _, s := range a.services {
		if s.State == Releasing {
			k := job{s.instance, s.JobID}
			releasing[k] = append(releasing[k], s)
		}
	}
	a.mu.Unlock()
	for k, ss := range releasing {
		jobID := k.id
		u, err := a.jobs.Get(ctx, k.instance, jobID)
		if err != nil {
			a.mu.Lock()
			for _, s := range ss {
				a.fail(s, fmt.Errorf("reading release job %s: %w", jobID, err))
			}
			a.mu.Unlock()
			continue
		}
		if !u.Job.State.Final() {
			continue
		}
		a.mu.Lock()
		for _, s := range ss {
			if s.gone {
				// Deautomated or locked while its job ran: a kick
				// meanwhile must not make it checked (and released)
				// again from what git said before.
				a.log.Info("decision: no longer automated (or locked); forgetting", "service", s.id.String(), "job", jobID)
				delete(a.services, s.id)
				continue
			}
			switch u.Job.State {
			case history.JobSucceeded:
				s.Failures, s.LastError = 0, ""
				wait := a.cfg.ShortWait
				if s.recheck {
					wait, s.recheck = 0, false
				}
				a.waitLocked(s, wait)
				a.log.Info("release job ended", "service", s.id.String(), "job", jobID, "commit", u.Job.Commit)
			default:
				a.fail(s, fmt.Errorf("release job %s %s: %s", jobID, u.Job.State, u.Job.Error))
			}
		}
		a.mu.Unlock()
	}
}

// check plans the newest images for the due services of one instance and
// decides for each: release (all of them in one job, one commit), nothing
// newer, filtered out, or failing.
func (a *Automator) check(ctx context.Context, instance string, ids []platform.ID) (unverified []unverifiedSkip) {
	// Planned as the job will be (Automated): a service fluxd will not
	// release, or a locked policy's workload, is skipped with its reason
	// rather than failing the whole batch as a release by hand would.
	// Cached: the pass fetched git a moment ago (Manifests), and plans
	// the revision it read; the job fetches again when it runs.
	plan, err := a.plans.Plan(ctx, release.Spec{Services: ids, AllLatest: true, User: User, Automated: true, Cached: true})
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for _, id := range ids {
		if s := a.services[id]; s != nil {
			s.LastCheck = now
		}
	}
	if err != nil {
		for _, id := range ids {
			if s := a.services[id]; s != nil {
				a.fail(s, fmt.Errorf("cannot check for newer images: %w", err))
			}
		}
		return
	}
	var toRelease []platform.ID
	var decided []release.Item
	// "Nothing newer" is most services' answer on most passes: at 10,000
	// automated services a line each made 10,000 lines a pass. Those are
	// logged at debug, and the pass says how many it found.
	quiet := 0
	defer func() {
		if quiet > 0 {
			a.log.Info("automator pass", "instance", instance, "checked", len(ids), "nothing newer", quiet, "to release", len(toRelease))
		}
	}()
	for _, it := range plan.Items {
		s := a.services[it.Service]
		if s == nil {
			continue
		}
		s.Warnings = it.Warnings
		unverified = append(unverified, a.newUnverified(s, instance, it)...)
		wasRefused := s.refused
		s.refused = false
		for _, w := range it.Warnings {
			a.log.Warn("policy problem", "service", it.Service.String(), "warning", w)
		}
		switch {
		case it.Action == release.Update:
			var us []string
			for _, u := range it.Updates {
				us = append(us, u.Container+"="+u.Target)
			}
			s.Decision = "release " + strings.Join(us, ", ")
			a.decided("release")
			toRelease = append(toRelease, it.Service)
			decided = append(decided, it)
			continue
		case strings.Contains(it.Reason, release.ReasonRegistry):
			a.fail(s, fmt.Errorf("%s", it.Reason))
			continue
		case release.Refused(it):
			// Remembered: asked again after RefusedWait, not each pass.
			s.refused = true
			if !wasRefused || s.Decision != "refused: "+it.Reason {
				a.log.Warn("decision: fluxd will not release it; asking again later", "service", it.Service.String(), "why", it.Reason, "in", a.cfg.RefusedWait)
			}
			s.Decision = "refused: " + it.Reason
			a.decided("skipped")
			s.Failures, s.LastError = 0, ""
			s.State, s.Next, s.JobID = UpToDate, a.clock.Now().Add(a.cfg.RefusedWait), ""
			continue
		case len(it.Warnings) > 0:
			s.Decision = "filtered out: " + it.Reason
			a.decided("filtered-out")
		case it.Action == release.Skip:
			s.Decision = "skipped: " + it.Reason
			a.decided("skipped")
		default:
			s.Decision = "nothing newer"
			a.decided("nothing-newer")
		}
		s.Failures, s.LastError = 0, ""
		if s.Decision == "nothing newer" {
			quiet++
			a.log.Debug("decision: "+s.Decision, "service", it.Service.String())
		} else {
			a.log.Info("decision: "+s.Decision, "service", it.Service.String())
		}
		s.State, s.Next, s.JobID = UpToDate, a.clock.Now().Add(a.cfg.LongWait), ""
	}
	// This pass answers the notification, whatever it decided.
	notified := a.notified
	a.notified = time.Time{}
	if len(toRelease) == 0 {
		return
	}
	// The message is the decision, shown with the queued job; the job
	// plans again when it runs, and its commit and history name what it
	// did (release.AutomatedMessage of the executed plan).
	spec := release.Spec{Services: toRelease, AllLatest: true, User: User, Automated: true,
		Message: release.AutomatedMessage(decided), NotifiedAt: notified}
	u, err := a.jobs.Enqueue(ctx, instance, spec, "")
	for _, id := range toRelease {
		s := a.services[id]
		if err != nil {
			a.fail(s, fmt.Errorf("queueing the release: %w", err))
			continue
		}
		s.State, s.JobID = Releasing, u.Job.ID
		a.log.Info("decision: "+s.Decision, "service", id.String(), "job", u.Job.ID, "batch", len(toRelease))
	}
	return unverified
}

// unverifiedSkip is one skipped unverified image to tell of.
type unverifiedSkip struct {
	id     platform.ID
	key    string
	notice history.Notice
}

// newUnverified lists the images it skipped for their signatures that
// s's receivers were not told of yet. Call with a.mu held.
func (a *Automator) newUnverified(s *service, instance string, it release.Item) []unverifiedSkip {
	if a.cfg.Notices == nil {
		return nil
	}
	var out []unverifiedSkip
	for _, u := range it.Unverified {
		v := u.Verification
		if v.Outcome != release.VerifyUnsigned && v.Outcome != release.VerifyFailed {
			continue // no verdict (a registry down): not a skip to tell of
		}
		key := v.Digest
		if key == "" {
			key = u.Image
		}
		if s.toldUnverified[key] {
			continue
		}
		at := u.Image
		if v.Digest != "" {
			at += " (" + v.Digest + ")"
		}
		out = append(out, unverifiedSkip{id: s.id, key: key, notice: history.Notice{CreatedAt: a.clock.Now(), Event: history.Event{
			Instance: instance, Type: history.UnverifiedSkipped, Services: []string{s.id.String()}, User: User,
			Message: fmt.Sprintf("container %s: skipped %s, newer than what runs: %s; it is not released until an image that verifies is pushed (or it is signed)", u.Container, at, v),
			EndedAt: a.clock.Now(),
		}}})
	}
	return out
}

// tellUnverified stores a notice for each skip, and remembers those
// stored: one that could not be stored is tried again on the next pass.
func (a *Automator) tellUnverified(ctx context.Context, skips []unverifiedSkip) {
	for _, sk := range skips {
		if _, err := a.cfg.Notices.Notify(ctx, sk.notice); err != nil {
			a.log.Warn("cannot store the notice of an image skipped for its signatures; will try again on the next check", "service", sk.id.String(), "error", err)
			continue
		}
		a.mu.Lock()
		if s := a.services[sk.id]; s != nil {
			if s.toldUnverified == nil {
				s.toldUnverified = map[string]bool{}
			}
			s.toldUnverified[sk.key] = true
		}
		a.mu.Unlock()
	}
}

// fail records an error and backs off exponentially: ShortWait, doubling
// per consecutive failure, up to MaxBackoff. Call with a.mu held.
func (a *Automator) fail(s *service, err error) {
	s.Failures++
	s.LastError = err.Error()
	wait := a.cfg.ShortWait
	for i := 1; i < s.Failures && wait < a.cfg.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, a.cfg.MaxBackoff)
	s.State, s.Next, s.JobID = Failing, a.clock.Now().Add(wait), ""
	s.Decision = "failing"
	a.decided("failing")
	a.log.Warn("decision: failing; will retry", "service", s.id.String(), "error", err, "failures", s.Failures, "retry_in", wait)
}

func (a *Automator) waitLocked(s *service, d time.Duration) {
	s.State, s.Next, s.JobID = Waiting, a.clock.Now().Add(d), ""
}

// nextDue is how long until a service is due; while a release job runs,
// its end kicks the automator, with a poll as a safety net.
func (a *Automator) nextDue() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.cfg.LongWait
	now := a.clock.Now()
	for _, s := range a.services {
		switch {
		case s.State.waits():
			next = min(next, s.Next.Sub(now))
		case s.State == Releasing:
			next = min(next, a.cfg.ShortWait)
		}
	}
	return max(next, 0)
}

func (a *Automator) observe() {
	if a.gauge == nil {
		return
	}
	counts := map[State]int{}
	for _, s := range a.States() {
		counts[s]++
	}
	for _, st := range allStates {
		a.gauge.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
}

// unnamedInstance is the instance a service automated without
// fluxd.io/automated-by is released under: the one instance whose scope
// holds it, else DefaultInstance.
func (a *Automator) unnamedInstance(id platform.ID, def *gitrepo.Definition, m *gitrepo.Manifests) string {
	if a.cfg.Instances == nil {
		return a.cfg.DefaultInstance
	}
	return release.SoleInstance(a.cfg.Instances(), func(sc *auth.Scope) bool {
		return release.InScope(sc, id, def, m)
	}, a.cfg.DefaultInstance)
}
