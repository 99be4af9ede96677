package automator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"k8s.io/utils/clock"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
)

// User is the user automated releases are made as.
const User = "automator"

// Releaser is what the automator needs of the release engine.
type Releaser interface {
	Manifests(ctx context.Context) (string, *gitrepo.Manifests, error)
	Plan(ctx context.Context, spec release.Spec) (*release.Plan, error)
	Execute(ctx context.Context, instance string, spec release.Spec, typ history.Type, opts release.ExecOptions) (*release.Result, error)
}

// Config sets the automator's timing.
type Config struct {
	// ShortWait follows a release (default 15s); LongWait follows a check
	// that found nothing to release (default 1m).
	ShortWait, LongWait time.Duration
	// DefaultInstance records automated releases of services that name no
	// instance in fluxd.io/automated-by.
	DefaultInstance string
	// Exec tunes the releases, e.g. following their rollout.
	Exec release.ExecOptions
}

// State is where a service is in the machine.
type State string

// The states.
const (
	Empty     State = "empty"
	UpToDate  State = "uptodate"
	Releasing State = "releasing"
	Waiting   State = "waiting"
)

// service is one automated service's machine.
type service struct {
	id       platform.ID
	instance string
	state    State
	due      time.Time // when Waiting ends
	plan     *release.Plan
}

// Automator runs the state machines.
type Automator struct {
	cfg      Config
	releaser Releaser
	clock    clock.Clock
	log      *slog.Logger

	services map[platform.ID]*service
	kick     chan struct{}
}

// New returns an Automator.
func New(cfg Config, r Releaser, clk clock.Clock, log *slog.Logger) *Automator {
	if cfg.ShortWait <= 0 {
		cfg.ShortWait = 15 * time.Second
	}
	if cfg.LongWait <= 0 {
		cfg.LongWait = time.Minute
	}
	if cfg.DefaultInstance == "" {
		cfg.DefaultInstance = "default"
	}
	return &Automator{cfg: cfg, releaser: r, clock: clk, log: log.With("component", "automator"),
		services: map[platform.ID]*service{}, kick: make(chan struct{}, 1)}
}

// Kick asks for a pass soon; kicks coalesce.
func (a *Automator) Kick() {
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
			a.wakeAll()
		case <-a.clock.After(next):
		}
	}
}

// wakeAll makes every waiting service due now.
func (a *Automator) wakeAll() {
	now := a.clock.Now()
	for _, s := range a.services {
		if s.state == Waiting {
			s.due = now
		}
	}
}

// States reports each known service's state, for tests and status.
func (a *Automator) States() map[platform.ID]State {
	out := map[platform.ID]State{}
	for id, s := range a.services {
		out[id] = s.state
	}
	return out
}

// Step reads which services are automated, runs the state function of
// every service that is due, and returns how long until the next is due.
func (a *Automator) Step(ctx context.Context) time.Duration {
	_, m, err := a.releaser.Manifests(ctx)
	if err != nil {
		a.log.Warn("cannot read which services are automated; will retry", "error", err)
		return a.cfg.ShortWait
	}
	automated := map[platform.ID]string{}
	for id, def := range m.Workloads {
		if def.Annotations[release.AnnotationAutomated] == "true" && def.Annotations[release.AnnotationLocked] != "true" {
			inst := def.Annotations[release.AnnotationAutomatedBy]
			if inst == "" {
				inst = a.cfg.DefaultInstance
			}
			automated[id] = inst
		}
	}
	for id, s := range a.services {
		if _, ok := automated[id]; !ok {
			a.log.Info("decision: no longer automated (or locked); forgetting", "service", id.String(), "state", string(s.state))
			delete(a.services, id)
		}
	}
	ids := make([]platform.ID, 0, len(automated))
	for id, inst := range automated {
		if _, ok := a.services[id]; !ok {
			a.services[id] = &service{id: id, instance: inst, state: Empty}
		}
		a.services[id].instance = inst
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		s := a.services[id]
		if s.state == Waiting && a.clock.Now().Before(s.due) {
			continue
		}
		// Run state functions until the service waits again; a pass is at
		// most refresh, decide, release.
		for i := 0; i < 4; i++ {
			if s.state = a.run(ctx, s); s.state == Waiting {
				break
			}
		}
	}
	return a.nextDue()
}

func (a *Automator) nextDue() time.Duration {
	next := a.cfg.LongWait
	now := a.clock.Now()
	for _, s := range a.services {
		if s.state == Waiting {
			if d := s.due.Sub(now); d < next {
				next = d
			}
		}
	}
	if next < 0 {
		next = 0
	}
	return next
}

// run is the state function table: each returns the next state.
func (a *Automator) run(ctx context.Context, s *service) State {
	switch s.state {
	case Empty, Waiting:
		return a.refresh(ctx, s)
	case UpToDate:
		if s.plan != nil && s.plan.Updates() > 0 {
			return Releasing
		}
		return a.wait(s, a.cfg.LongWait)
	case Releasing:
		return a.release(ctx, s)
	}
	return Empty
}

// refresh plans the newest images for the service.
func (a *Automator) refresh(ctx context.Context, s *service) State {
	plan, err := a.releaser.Plan(ctx, release.Spec{Services: []platform.ID{s.id}, AllLatest: true, User: User})
	if err != nil {
		a.log.Warn("decision: cannot check for newer images; will retry", "service", s.id.String(), "error", err)
		s.plan = nil
		return a.wait(s, a.cfg.ShortWait)
	}
	s.plan = plan
	if plan.Updates() == 0 {
		reason := "nothing newer"
		if len(plan.Items) == 1 && plan.Items[0].Reason != "" {
			reason = plan.Items[0].Reason
		}
		a.log.Info("decision: "+reason, "service", s.id.String())
	}
	return UpToDate
}

// release executes the plan's release, as the automator.
func (a *Automator) release(ctx context.Context, s *service) State {
	spec := release.Spec{Services: []platform.ID{s.id}, AllLatest: true, User: User, Message: "automated release"}
	res, err := a.releaser.Execute(ctx, s.instance, spec, history.AutomatedRelease, a.cfg.Exec)
	switch {
	case err != nil:
		a.log.Warn("decision: release failed; will retry", "service", s.id.String(), "error", err)
	case res.Commit == "":
		a.log.Info("decision: nothing to release after all", "service", s.id.String())
	default:
		var targets []string
		for _, it := range res.Plan.Items {
			for _, u := range it.Updates {
				targets = append(targets, u.Container+"="+u.Target)
			}
		}
		a.log.Info(fmt.Sprintf("decision: released %v", targets), "service", s.id.String(), "commit", res.Commit)
	}
	s.plan = nil
	return a.wait(s, a.cfg.ShortWait)
}

func (a *Automator) wait(s *service, d time.Duration) State {
	s.due = a.clock.Now().Add(d)
	return Waiting
}
