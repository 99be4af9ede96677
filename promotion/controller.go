package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/fluxerr"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// Automatic is the author of the promotions and rollbacks fluxd makes by
// itself.
const Automatic = "fluxd"

// Config wires a Controller.
type Config struct {
	Store    Store
	Releaser Releaser
	Cluster  Cluster
	Digests  Digests
	// Checker runs the stages' checks; nil fails every check with a
	// message saying no checker is wired.
	Checker Checker
	// Instance is the job instance an automatic promotion into a stage
	// runs as (whose history shows it); nil or "" means "default".
	Instance func(services []platform.ID) string
	// Notice is told of every change of a record, for history and
	// notifications; nil: none.
	Notice func(ctx context.Context, n Notice)
	// Now is the clock; nil is time.Now.
	Now Clock
	// Interval is how often the loop steps with nothing waking it
	// (default 2s): soaks end and jobs end between wake-ups.
	Interval time.Duration
	Log      *slog.Logger
}

// Notice is one change worth a history row and a notification.
type Notice struct {
	Pipeline, Stage, Bundle string
	// What: "promoted", "verified", "failed", "awaiting approval",
	// "approved", "paused", "resumed", "rolled back", "superseded".
	What string
	By   string
	// Text says it in a sentence.
	Text string
	// Services are the stage's services.
	Services []platform.ID
	// Job is the release job that moves it, if any.
	Job string
}

// Controller runs pipelines: it forms bundles from what stages run,
// runs their gates, and promotes and rolls back through the release
// engine. One runs on the leading replica; the store keeps its state.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	pipelines []Pipeline
	problems  []Problem
	// holds are the last step's reasons a stage holds a promotion, and
	// locked its locked services, by pipeline ID and stage.
	holds map[string]string
	// stuck are automatic promotions that could not be planned or
	// queued (a tag moved, an image that fails verification), by
	// pipeline ID and stage: shown as the stage's hold, and tried
	// again only after stuckRetry, not at every step.
	stuck  map[string]stuckPromotion
	locked map[string]string
	// away says why a stage is not this fluxd's (another cluster's, or
	// split), by pipeline ID and stage; "" or absent: it is.
	away map[string]string
	// inflight are the checks running, by record key and check name.
	inflight map[string]bool
	wake     chan struct{}
	// promoting serialises promote: the loop's step and a person's
	// promotion (both on the leader) must not queue two jobs for one
	// stage.
	promoting sync.Mutex
}

// New makes a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, log: cfg.Log, holds: map[string]string{}, stuck: map[string]stuckPromotion{}, locked: map[string]string{}, away: map[string]string{},
		inflight: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// SetPipelines replaces the pipelines read from git (at a new revision),
// with the problems of those that could not be read.
func (c *Controller) SetPipelines(ps []Pipeline, problems []Problem) {
	c.mu.Lock()
	c.pipelines, c.problems = slices.Clone(ps), slices.Clone(problems)
	c.mu.Unlock()
	for _, p := range problems {
		c.log.Warn("a Pipeline in git is refused", "problem", p.Error())
	}
	c.Wake()
}

// Wake asks for a step now: a job ended, a rollout moved, git changed.
func (c *Controller) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run steps every pipeline until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("promotion step", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
	}
}

// Pipelines returns the pipelines read from git.
func (c *Controller) Pipelines(context.Context) ([]Pipeline, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pipelines) == 0 && len(c.problems) > 0 {
		// Nothing to show, and git has Pipelines fluxd refused: say
		// why, rather than that there are none.
		var why []string
		for _, p := range c.problems {
			why = append(why, p.Error())
		}
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("the Pipelines in git are refused: %s", strings.Join(why, "; ")),
			"Fix them and push; 'fluxctl check' on a checkout shows the same problems before you push.")
	}
	return slices.Clone(c.pipelines), nil
}

func (c *Controller) pipeline(id string) (Pipeline, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, p := range c.pipelines {
		if p.ID() == id || (!strings.Contains(id, "/") && p.Name == id) {
			return p, nil
		}
		ids = append(ids, p.ID())
	}
	if len(c.pipelines) == 0 {
		return Pipeline{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("no Pipeline %q: fluxd read no Pipeline objects under --git-path (docs/promotion.md shows one; 'fluxctl check' says what it found)", id), "")
	}
	return Pipeline{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("no Pipeline %q (pipelines: %s)", id, strings.Join(ids, ", ")), "")
}

// Step runs one pass over every pipeline: observe, gate, decide, act.
func (c *Controller) Step(ctx context.Context) error {
	ps, _ := c.Pipelines(ctx)
	var errs []error
	for _, p := range ps {
		if err := c.step(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("pipeline %s: %w", p.ID(), err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) step(ctx context.Context, p Pipeline) error {
	var errs []error
	mine := map[string]bool{}
	for _, st := range p.Stages {
		run, why, err := c.where(ctx, st)
		c.mu.Lock()
		c.away[p.ID()+"\x00"+st.Name] = why
		c.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("stage %s: %w", st.Name, err))
			continue
		}
		if why != "" {
			continue // another cluster's fluxd steps it
		}
		mine[st.Name] = true
		if err := c.observe(ctx, p, st, run); err != nil {
			errs = append(errs, fmt.Errorf("stage %s: %w", st.Name, err))
		}
	}
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	now := c.cfg.Now()
	for _, r := range recs {
		st, ok := p.Stage(r.Stage)
		if !ok || !mine[st.Name] {
			continue // a stage since removed from git, or not this cluster's
		}
		switch r.Status {
		case Verifying:
			c.startChecks(ctx, p, st, r)
		case Soaking:
			if nr, _ := Advance(r, st, Event{Kind: EvTick}, now); nr.Status != r.Status {
				if _, err := c.put(ctx, p, st, nr, "verified", "", ""); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	v, err := c.view(ctx, p)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	c.mu.Lock()
	for _, st := range p.Stages {
		delete(c.holds, p.ID()+"\x00"+st.Name)
	}
	c.mu.Unlock()
	for _, d := range Next(p, v) {
		st, _ := p.Stage(d.Stage)
		if !mine[st.Name] {
			continue // the fluxd of the stage's cluster decides the same and acts
		}
		switch d.Action {
		case ActHold:
			c.mu.Lock()
			c.holds[p.ID()+"\x00"+st.Name] = d.Reason
			c.mu.Unlock()
		case ActAwaitApproval:
			if err := c.await(ctx, p, st, d.Bundle); err != nil {
				errs = append(errs, err)
			}
		case ActPromote, ActRollback:
			what := "promoted"
			if d.Action == ActRollback {
				what = "rolled back"
			}
			key := p.ID() + "\x00" + st.Name
			now := c.cfg.Now()
			c.mu.Lock()
			sp, stuck := c.stuck[key]
			c.mu.Unlock()
			if stuck && sp.bundle == d.Bundle && now.Sub(sp.at) < stuckRetry {
				c.mu.Lock()
				c.holds[key] = sp.why
				c.mu.Unlock()
				continue
			}
			if _, err := c.promote(ctx, p, st, d.Bundle, Automatic, c.instance(st), "", false, what, d.Reason); err != nil {
				errs = append(errs, fmt.Errorf("%s %s into %s: %w", what, d.Bundle, st.Name, err))
				why := fmt.Sprintf("fluxd cannot %s bundle %s into %s (it tries again in %s): %s", map[bool]string{true: "roll back to", false: "promote"}[d.Action == ActRollback], d.Bundle, st.Name, stuckRetry, fluxerr.FirstLine(err))
				c.mu.Lock()
				c.stuck[key] = stuckPromotion{bundle: d.Bundle, at: now, why: why}
				c.holds[key] = why
				c.mu.Unlock()
			} else {
				c.mu.Lock()
				delete(c.stuck, key)
				c.mu.Unlock()
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) instance(st Stage) string {
	if c.cfg.Instance != nil {
		if in := c.cfg.Instance(st.Services); in != "" {
			return in
		}
	}
	return "default"
}

// where reads what a stage's services run in this fluxd's cluster, and
// says whether the stage is this fluxd's: it is when every one of its
// services is here (in this cluster and in this fluxd's git). why is
// empty then; otherwise it says whose the stage is, for 'fluxctl
// stages'. A stage none of whose services is here is another cluster's
// fluxd's (fluxds of several clusters share one store): this one reads
// its records, for the stages that take from it, and never acts on it.
// A stage split between clusters is refused: no fluxd could promote it
// in one release.
func (c *Controller) where(ctx context.Context, st Stage) ([]Running, string, error) {
	run, err := c.cfg.Cluster.Running(ctx, st.Services)
	if err != nil {
		return nil, "", err
	}
	var here, away []string
	for _, r := range run {
		if r.Missing {
			away = append(away, r.Service.String())
		} else {
			here = append(here, r.Service.String())
		}
	}
	switch {
	case len(away) == 0:
		return run, "", nil
	case len(here) == 0:
		return run, fmt.Sprintf("not in this fluxd's cluster (%s not here): the fluxd of the cluster running %s steps %s",
			strings.Join(away, ", "), strings.Join(away, ", "), st.Name), nil
	}
	return run, fmt.Sprintf("refused: stage %s is split between clusters: %s here, %s not (or not in this fluxd's git); a stage's services must all run in one cluster, whose fluxd promotes it",
		st.Name, strings.Join(here, ", "), strings.Join(away, ", ")), nil
}

// view is what Next decides from.
func (c *Controller) view(ctx context.Context, p Pipeline) (View, error) {
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return View{}, err
	}
	pauses, err := c.cfg.Store.Pauses(ctx, p.ID())
	if err != nil {
		return View{}, err
	}
	v := View{Records: recs, Paused: pauses, Locked: map[string]string{}}
	c.mu.Lock()
	for _, st := range p.Stages {
		if l := c.locked[p.ID()+"\x00"+st.Name]; l != "" {
			v.Locked[st.Name] = l
		}
	}
	c.mu.Unlock()
	return v, nil
}

// observe follows a stage's current job, or, with none, reads what the
// stage's services run: once all of them are Ready, their images are a
// bundle, and a bundle the stage did not run before is recorded (a
// release into the first stage, or a release by hand).
func (c *Controller) observe(ctx context.Context, p Pipeline, st Stage, run []Running) error {
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return err
	}
	here := stageRecords(recs, st.Name)
	cur, hasCur := current(here)
	if hasCur && cur.Job != "" {
		return c.followJob(ctx, p, st, cur)
	}
	var locks []string
	for _, r := range run {
		if r.Locked != "" {
			locks = append(locks, fmt.Sprintf("%s is %s", r.Service, r.Locked))
		}
	}
	c.mu.Lock()
	c.locked[p.ID()+"\x00"+st.Name] = strings.Join(locks, "; ")
	c.mu.Unlock()
	var imgs []Image
	for _, r := range run {
		if r.Missing || !r.Ready || r.Failed != "" {
			return nil // not there, or still rolling out: look again later
		}
		for _, ctr := range r.Containers {
			img, err := c.image(ctx, ctr.Image)
			if err != nil {
				return fmt.Errorf("%s container %s: %w", r.Service, ctr.Name, err)
			}
			imgs = append(imgs, img)
		}
	}
	if len(imgs) == 0 {
		return nil
	}
	now := c.cfg.Now()
	b, err := NewBundle(p.ID(), st.Name, imgs, now)
	if err != nil {
		return err
	}
	if hasCur && cur.Bundle == b.ID {
		return nil
	}
	if stored, ok, err := c.bundle(ctx, p, b.ID); err != nil {
		return err
	} else if ok {
		b = stored
	} else if err := c.cfg.Store.SaveBundle(ctx, b); err != nil {
		return err
	}
	rec, seen := find(here, b.ID)
	// The newest bundle verified in the from-stage, found running with
	// no record: fluxd's own promotion, whose record a restart lost
	// between queueing the job and writing it. It is not a person's
	// release, and does not pause the stage.
	ours := false
	if nv, ok := newestVerified(stageRecords(recs, st.From)); ok && st.From != "" && !seen && nv.Bundle == b.ID {
		ours = true
	}
	if !seen {
		by := "release"
		if ours {
			by = Automatic
		}
		rec = Record{Pipeline: p.ID(), Stage: st.Name, Bundle: b.ID, Created: b.Created, Status: Promoted, Since: now,
			PromotedBy: by}
	}
	rec.Current = true
	if rec.Status == Promoted {
		rec, _ = Advance(rec, st, Event{Kind: EvRolledOut}, now)
	}
	what := "running"
	if rec.Status == Verified {
		what = "verified"
	}
	if _, err := c.put(ctx, p, st, rec, what, rec.PromotedBy, fmt.Sprintf("%s runs bundle %s (%s), released outside a promotion", st.Name, b.ID, imagesText(b))); err != nil {
		return err
	}
	if !hasCur {
		return nil
	}
	if err := c.supersede(ctx, p, st, cur, b.ID); err != nil {
		return err
	}
	if st.From == "" || cur.Status == Failed || ours {
		// The first stage takes releases: that is its job. A stage
		// whose bundle failed and that went back (the release job's
		// own rollback on failure) was not changed by a person.
		return nil
	}
	// A stage that takes bundles by promotion was released into by hand
	// (fluxctl release, or fluxctl rollback): automatic promotion would
	// overwrite it, so it pauses until a person resumes it.
	pz := Pause{By: "release", Reason: fmt.Sprintf("%s now runs bundle %s, released outside a promotion (fluxctl release or rollback)", st.Name, b.ID), Since: now}
	if err := c.cfg.Store.SetPause(ctx, p.ID(), st.Name, &pz); err != nil {
		return err
	}
	c.notice(ctx, Notice{Pipeline: p.ID(), Stage: st.Name, Bundle: b.ID, What: "paused", By: pz.By, Services: st.Services,
		Text: fmt.Sprintf("automatic promotion into %s is paused: %s; 'fluxctl stages resume %s' ends it", st.Name, pz.Reason, st.Name)})
	return nil
}

// followJob moves the current record on when its release job ends.
func (c *Controller) followJob(ctx context.Context, p Pipeline, st Stage, cur Record) error {
	u, err := c.cfg.Releaser.Get(ctx, cur.JobInstance, cur.Job)
	if err != nil {
		return fmt.Errorf("job %s of bundle %s: %w", cur.Job, cur.Bundle, err)
	}
	if !u.Job.State.Final() {
		return nil
	}
	now := c.cfg.Now()
	next := cur
	next.Job, next.JobInstance = "", ""
	what, text := "", ""
	switch {
	case u.Job.State == history.JobSucceeded && cur.Status == Promoted:
		next, _ = Advance(next, st, Event{Kind: EvRolledOut}, now)
		what = "rolled out"
		if next.Status == Verified {
			what = "verified"
		}
	case u.Job.State == history.JobSucceeded:
		// A rollback onto a bundle verified here before: it stays so.
	case cur.Status == Promoted:
		reason := u.Job.Error
		if reason == "" {
			reason = "job " + string(u.Job.State)
		}
		next, _ = Advance(next, st, Event{Kind: EvRolloutFailed, Reason: reason}, now)
		what, text = "failed", fmt.Sprintf("bundle %s failed in %s: its release job %s ended %s: %s", cur.Bundle, st.Name, cur.Job, u.Job.State, reason)
	default:
		what, text = "failed", fmt.Sprintf("the release job %s putting %s back on bundle %s ended %s: %s", cur.Job, st.Name, cur.Bundle, u.Job.State, u.Job.Error)
	}
	_, err = c.put(ctx, p, st, next, what, "", text)
	return err
}

// image is a running container's image as a bundle holds it: its
// repository, tag and digest (the one written, or the registry's).
func (c *Controller) image(ctx context.Context, ref string) (Image, error) {
	name, digest, _ := strings.Cut(ref, "@")
	repo, tag := name, ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		repo, tag = name[:i], name[i+1:]
	}
	if tag == "" {
		return Image{}, fmt.Errorf("image %q has no tag: a bundle names each image by tag and digest", ref)
	}
	if digest == "" {
		d, err := c.cfg.Digests.Digest(ctx, name)
		if err != nil {
			return Image{}, fmt.Errorf("reading the digest of %s: %w", name, err)
		}
		digest = d
	}
	return Image{Repository: repo, Tag: tag, Digest: digest}, nil
}

func (c *Controller) bundle(ctx context.Context, p Pipeline, id string) (Bundle, bool, error) {
	bs, err := c.cfg.Store.Bundles(ctx, p.ID())
	if err != nil {
		return Bundle{}, false, err
	}
	for _, b := range bs {
		if b.ID == id {
			return b, true, nil
		}
	}
	return Bundle{}, false, nil
}

// resolve finds a bundle by its ID or a unique prefix of it.
func (c *Controller) resolve(ctx context.Context, p Pipeline, prefix string) (Bundle, error) {
	bs, err := c.cfg.Store.Bundles(ctx, p.ID())
	if err != nil {
		return Bundle{}, err
	}
	var found []Bundle
	for _, b := range bs {
		if strings.HasPrefix(b.ID, prefix) {
			found = append(found, b)
		}
	}
	switch {
	case prefix == "" || len(found) == 0:
		return Bundle{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no bundle %q ('fluxctl bundles' lists them)", p.ID(), prefix), "")
	case len(found) > 1:
		return Bundle{}, fluxerr.New(fluxerr.User, fmt.Errorf("%q names %d bundles of pipeline %s; give more of its ID", prefix, len(found), p.ID()), "")
	}
	return found[0], nil
}

// put writes a record and tells of it. A conflict is returned: another
// writer moved first, and the next step decides again.
func (c *Controller) put(ctx context.Context, p Pipeline, st Stage, r Record, what, by, text string) (Record, error) {
	nr, err := c.cfg.Store.PutRecord(ctx, r)
	if err != nil {
		return r, err
	}
	if what != "" {
		if text == "" {
			text = fmt.Sprintf("bundle %s is %s in %s", r.Bundle, r.Status, st.Name)
			if r.Reason != "" {
				text += ": " + r.Reason
			}
		}
		c.notice(ctx, Notice{Pipeline: p.ID(), Stage: st.Name, Bundle: r.Bundle, What: what, By: by, Text: text, Services: st.Services, Job: r.Job})
	}
	return nr, nil
}

func (c *Controller) notice(ctx context.Context, n Notice) {
	c.log.Info("promotion", "pipeline", n.Pipeline, "stage", n.Stage, "bundle", n.Bundle, "what", n.What, "text", n.Text)
	if c.cfg.Notice != nil {
		c.cfg.Notice(ctx, n)
	}
}

func (c *Controller) supersede(ctx context.Context, p Pipeline, st Stage, old Record, by string) error {
	nr, err := Advance(old, st, Event{Kind: EvSuperseded, Bundle: by}, c.cfg.Now())
	if err != nil {
		return err
	}
	_, err = c.put(ctx, p, st, nr, "", "", "")
	return err
}

// startChecks runs a verifying record's checks that have not passed and
// are not running, each on its own; their results step the record.
func (c *Controller) startChecks(ctx context.Context, p Pipeline, st Stage, r Record) {
	b, ok, err := c.bundle(ctx, p, r.Bundle)
	if err != nil || !ok {
		return
	}
	for _, chk := range st.Checks {
		if slices.Contains(r.Passed, chk.Name) {
			continue
		}
		key := p.ID() + "\x00" + st.Name + "\x00" + r.Bundle + "\x00" + chk.Name
		c.mu.Lock()
		busy := c.inflight[key]
		c.inflight[key] = true
		c.mu.Unlock()
		if busy {
			continue
		}
		go func() {
			defer func() {
				c.mu.Lock()
				delete(c.inflight, key)
				c.mu.Unlock()
				c.Wake()
			}()
			var err error
			if c.cfg.Checker == nil {
				err = errors.New("fluxd runs no checker for this kind of check")
			} else {
				err = c.cfg.Checker.Run(ctx, chk, st, b)
			}
			if ctx.Err() != nil {
				return // stopping: the next leader runs it again
			}
			ev := Event{Kind: EvCheckPassed, Check: chk.Name}
			if err != nil {
				ev = Event{Kind: EvCheckFailed, Check: chk.Name, Reason: err.Error()}
			}
			if err := c.event(ctx, p, st, r.Bundle, ev); err != nil && !errors.Is(err, ErrTransition) {
				c.log.Warn("recording a check's result", "pipeline", p.ID(), "stage", st.Name, "bundle", r.Bundle, "check", chk.Name, "error", err)
			}
		}()
	}
}

// event steps one record by ev, reading it again on a conflict.
func (c *Controller) event(ctx context.Context, p Pipeline, st Stage, bundle string, ev Event) error {
	for try := 0; ; try++ {
		recs, err := c.cfg.Store.Records(ctx, p.ID())
		if err != nil {
			return err
		}
		r, ok := find(stageRecords(recs, st.Name), bundle)
		if !ok {
			return fmt.Errorf("bundle %s has no record in %s: %w", bundle, st.Name, ErrTransition)
		}
		nr, err := Advance(r, st, ev, c.cfg.Now())
		if err != nil {
			return err
		}
		what := ""
		switch {
		case nr.Status != r.Status && nr.Status == Failed:
			what = "failed"
		case nr.Status != r.Status && nr.Status == Verified:
			what = "verified"
		case nr.Status != r.Status && nr.Status == Soaking:
			what = "soaking"
		case ev.Kind == EvApproved:
			what = "approved"
		}
		text := ""
		if what == "approved" {
			text = fmt.Sprintf("bundle %s approved for %s by %s (%d of %d)", bundle, st.Name, ev.By, len(nr.Approvers), st.Approvals)
		}
		_, err = c.put(ctx, p, st, nr, what, ev.By, text)
		if errors.Is(err, ErrConflict) && try < 5 {
			continue
		}
		return err
	}
}

// await records a bundle as awaiting a stage's approvals.
func (c *Controller) await(ctx context.Context, p Pipeline, st Stage, bundle string) error {
	b, ok, err := c.bundle(ctx, p, bundle)
	if err != nil || !ok {
		return err
	}
	r := Record{Pipeline: p.ID(), Stage: st.Name, Bundle: bundle, Created: b.Created, Status: AwaitingApproval, Since: c.cfg.Now()}
	_, err = c.put(ctx, p, st, r, "awaiting approval", "", fmt.Sprintf("bundle %s (%s) is verified in %s and awaits %d approval(s) for %s: 'fluxctl approve --stage %s %s'",
		bundle, imagesText(b), st.From, st.Approvals, st.Name, st.Name, bundle))
	if errors.Is(err, ErrConflict) {
		return nil // another replica recorded it
	}
	if err != nil {
		return err
	}
	// An older bundle still awaiting approval here is superseded: only
	// the newest verified bundle is ever promoted, so approving the
	// older one could not move anything.
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return err
	}
	for _, o := range stageRecords(recs, st.Name) {
		if o.Status == AwaitingApproval && o.Bundle != bundle {
			if err := c.supersede(ctx, p, st, o, bundle); err != nil && !errors.Is(err, ErrConflict) {
				return err
			}
		}
	}
	return nil
}

// spec is the release that promotes b into st.
func spec(p Pipeline, st Stage, b Bundle, user, why string, force bool) release.Spec {
	pr := &release.Promotion{Pipeline: p.ID(), Stage: st.Name, Bundle: b.ID}
	for _, img := range b.Images {
		pr.Images = append(pr.Images, release.PromotedImage{Repository: img.Repository, Tag: img.Tag, Digest: img.Digest})
	}
	return release.Spec{Services: slices.Clone(st.Services), User: user, Message: why, Force: force, Promotion: pr}
}

// promote moves stage st onto bundle: it plans the promotion, queues its
// job (with checksum, the plan a person confirmed; empty: the plan just
// made) and records the bundle as the stage's current one. A plan with
// nothing to change records the bundle as rolled out at once.
func (c *Controller) promote(ctx context.Context, p Pipeline, st Stage, bundle, user, instance, checksum string, force bool, what, why string) (jobs.JobUpdate, error) {
	c.promoting.Lock()
	defer c.promoting.Unlock()
	b, err := c.resolve(ctx, p, bundle)
	if err != nil {
		return jobs.JobUpdate{}, err
	}
	// Decided on records read before the lock: a promotion of this
	// bundle already under way is that one, not a second job.
	if recs, err := c.cfg.Store.Records(ctx, p.ID()); err != nil {
		return jobs.JobUpdate{}, err
	} else if cur, ok := current(stageRecords(recs, st.Name)); ok && cur.Bundle == b.ID && cur.Job != "" {
		if cur.JobInstance != instance {
			return jobs.JobUpdate{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s is being promoted into %s already", b.ID, st.Name),
				"'fluxctl stages' shows it; wait for that promotion to end.")
		}
		return c.cfg.Releaser.Get(ctx, cur.JobInstance, cur.Job)
	}
	sp := spec(p, st, b, user, why, force)
	plan, err := c.cfg.Releaser.Plan(ctx, sp)
	if err != nil {
		return jobs.JobUpdate{}, err
	}
	if checksum == "" {
		checksum = plan.Checksum
	}
	var u jobs.JobUpdate
	if plan.Updates() > 0 {
		if u, err = c.cfg.Releaser.Enqueue(ctx, instance, sp, checksum); err != nil {
			return u, err
		}
	}
	// The job is queued: its record must say so, or the next step
	// would decide the same promotion again. Another writer (a check's
	// result, an approval through another replica) may move a record
	// between the read and the write: read again and write again.
	for try := 0; ; try++ {
		err := c.recordPromotion(ctx, p, st, b, u, user, instance, what, why)
		if !errors.Is(err, ErrConflict) || try >= 8 {
			return u, err
		}
	}
}

// recordPromotion records bundle b as the stage's current one, moved by
// job u (none: nothing to write, so rolled out at once), and the stage's
// previous bundle as superseded.
func (c *Controller) recordPromotion(ctx context.Context, p Pipeline, st Stage, b Bundle, u jobs.JobUpdate, user, instance, what, why string) error {
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return err
	}
	here := stageRecords(recs, st.Name)
	now := c.cfg.Now()
	rec, seen := find(here, b.ID)
	if !seen {
		rec = Record{Pipeline: p.ID(), Stage: st.Name, Bundle: b.ID, Created: b.Created}
	}
	done := rec.Current && rec.Job == u.Job.ID && rec.Job != ""
	if !done {
		// Not written by an earlier try (whose supersede below met a
		// conflict: then only that is left to do).
		if rec.Status != Verified {
			rec.Status, rec.Since, rec.Reason = Promoted, now, ""
			rec.Passed, rec.RolledOut, rec.SoakUntil = nil, time.Time{}, time.Time{}
		}
		rec.Current, rec.PromotedBy = true, user
		rec.Job, rec.JobInstance = u.Job.ID, instance
		if u.Job.ID == "" {
			rec.JobInstance = ""
			if rec.Status == Promoted {
				rec, _ = Advance(rec, st, Event{Kind: EvRolledOut}, now)
			}
		}
		text := fmt.Sprintf("%s bundle %s (%s) into %s by %s", what, b.ID, imagesText(b), st.Name, user)
		if why != "" {
			text += ": " + why
		}
		if _, err := c.put(ctx, p, st, rec, what, user, text); err != nil {
			return err
		}
	}
	// Every other bundle the stage ran is not its current one any more
	// (a conflict here makes the caller read and write again).
	for _, o := range here {
		if o.Current && o.Bundle != b.ID {
			if err := c.supersede(ctx, p, st, o, b.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

func imagesText(b Bundle) string {
	var s []string
	for _, img := range b.Images {
		s = append(s, img.Repository+":"+img.Tag)
	}
	return strings.Join(s, ", ")
}

// stuckRetry is how long fluxd waits before it tries again an automatic
// promotion it could not plan or queue.
const stuckRetry = time.Minute

// stuckPromotion is an automatic promotion that failed: which bundle,
// when, and why (shown as the stage's hold).
type stuckPromotion struct {
	bundle string
	at     time.Time
	why    string
}
