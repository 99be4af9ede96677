package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fluxd/fluxd/internal/fluxerr"

	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// What fluxctl and the page ask of the Controller (the daemon's
// Promotions interface).

// Stages returns each stage of a pipeline with its current bundle, its
// gates' progress and what waits.
func (c *Controller) Stages(ctx context.Context, pipeline string) ([]StageStatus, error) {
	p, err := c.pipeline(pipeline)
	if err != nil {
		return nil, err
	}
	v, err := c.view(ctx, p)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	out := make([]StageStatus, 0, len(p.Stages))
	for _, st := range p.Stages {
		s := StageStatus{Pipeline: p.ID(), Stage: st.Name, From: st.From, Checks: len(st.Checks), Approvals: st.Approvals}
		for _, id := range st.Services {
			s.Services = append(s.Services, id.String())
		}
		here := stageRecords(v.Records, st.Name)
		if cur, ok := current(here); ok {
			cur := cur
			s.Current = &cur
			s.ChecksPassed = len(cur.Passed)
			s.SoakLeft = cur.SoakLeft(now)
		}
		for _, r := range here {
			if r.Status == AwaitingApproval {
				s.Waiting = append(s.Waiting, r)
			}
		}
		if pz, ok := v.Paused[st.Name]; ok {
			pz := pz
			s.Paused = &pz
		}
		s.Locked = v.Locked[st.Name]
		c.mu.Lock()
		s.Hold = c.holds[p.ID()+"\x00"+st.Name]
		c.mu.Unlock()
		if _, why, err := c.where(ctx, st); err == nil && why != "" {
			s.Away, s.Hold = why, why
		}
		out = append(out, s)
	}
	return out, nil
}

// Bundles returns a pipeline's bundles, newest first, each with its
// record in every stage it reached, in stage order.
func (c *Controller) Bundles(ctx context.Context, pipeline string) ([]BundleStatus, error) {
	p, err := c.pipeline(pipeline)
	if err != nil {
		return nil, err
	}
	bs, err := c.cfg.Store.Bundles(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	out := make([]BundleStatus, 0, len(bs))
	for i := len(bs) - 1; i >= 0; i-- {
		s := BundleStatus{Bundle: bs[i]}
		for _, st := range p.Stages {
			if r, ok := find(stageRecords(recs, st.Name), bs[i].ID); ok {
				s.Stages = append(s.Stages, r)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// manual checks a promotion by hand, and resolves its bundle (by
// default the newest verified in the from-stage).
func (c *Controller) manual(ctx context.Context, req PromoteRequest) (Pipeline, Stage, Bundle, View, error) {
	p, err := c.pipeline(req.Pipeline)
	if err != nil {
		return Pipeline{}, Stage{}, Bundle{}, View{}, err
	}
	st, ok := p.Stage(req.Stage)
	if !ok {
		return p, Stage{}, Bundle{}, View{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no stage %q (stages: %s)", p.ID(), req.Stage, stageNames(p)), "")
	}
	if _, why, err := c.where(ctx, st); err != nil {
		return p, st, Bundle{}, View{}, err
	} else if why != "" {
		return p, st, Bundle{}, View{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("this fluxd does not promote into %s (%s); ask the fluxd of the stage's cluster (fluxctl --url)", st.Name, why), "")
	}
	v, err := c.view(ctx, p)
	if err != nil {
		return p, st, Bundle{}, v, err
	}
	id := req.Bundle
	if id == "" {
		if st.From == "" {
			return p, st, Bundle{}, v, fluxerr.New(fluxerr.User, fmt.Errorf("stage %s is the pipeline's first: it takes new images by release or automation, not by promotion", st.Name), fmt.Sprintf("Release into it instead: fluxctl release --service %s --update-image IMAGE.", firstService(st)))
		}
		nv, ok := newestVerified(stageRecords(v.Records, st.From))
		if !ok {
			return p, st, Bundle{}, v, fluxerr.New(fluxerr.Precondition, fmt.Errorf("no bundle is verified in %s yet, so there is nothing to promote into %s; 'fluxctl stages' shows where they are", st.From, st.Name), "")
		}
		id = nv.Bundle
	}
	b, err := c.resolve(ctx, p, id)
	if err != nil {
		return p, st, Bundle{}, v, err
	}
	if err := Promotable(p, st.Name, b.ID, v, req.Force); err != nil {
		return p, st, b, v, err
	}
	return p, st, b, v, nil
}

// PlanPromotion plans a promotion by hand without making it: what
// `fluxctl promote --dry-run` shows, and what its confirmation's
// checksum covers.
func (c *Controller) PlanPromotion(ctx context.Context, req PromoteRequest) (release.Spec, *release.Plan, error) {
	p, st, b, _, err := c.manual(ctx, req)
	if err != nil {
		return release.Spec{}, nil, err
	}
	sp := spec(p, st, b, req.User, "promoted by hand", req.Force)
	plan, err := c.cfg.Releaser.Plan(ctx, sp)
	return sp, plan, err
}

// Promote promotes a bundle into a stage by hand, with the checksum of
// the plan the person confirmed. Promoting anything but the newest
// bundle verified in the from-stage pauses automatic promotion into the
// stage, so that fluxd does not overwrite it.
func (c *Controller) Promote(ctx context.Context, instance string, req PromoteRequest, checksum string) (jobs.JobUpdate, error) {
	if req.User == "" {
		return jobs.JobUpdate{}, errors.New("a promotion by hand needs the user who makes it")
	}
	p, st, b, v, err := c.manual(ctx, req)
	if err != nil {
		return jobs.JobUpdate{}, err
	}
	why := "promoted by hand"
	if req.Force {
		why = "promoted by hand with --force (not verified in " + st.From + ")"
	}
	u, err := c.promote(ctx, p, st, b.ID, req.User, instance, checksum, req.Force, "promoted", why)
	if err != nil {
		return u, err
	}
	if st.From != "" && PausesAuto(p, st.Name, b.ID, v) {
		pz := Pause{By: req.User, Reason: fmt.Sprintf("bundle %s was promoted by hand, not the newest verified in %s", b.ID, st.From), Since: c.cfg.Now()}
		if err := c.cfg.Store.SetPause(ctx, p.ID(), st.Name, &pz); err != nil {
			return u, fmt.Errorf("promoted, but pausing %s failed: %w", st.Name, err)
		}
		c.notice(ctx, Notice{Pipeline: p.ID(), Stage: st.Name, Bundle: b.ID, What: "paused", By: req.User, Services: st.Services,
			Text: fmt.Sprintf("automatic promotion into %s is paused by %s: %s; 'fluxctl stages resume %s' ends it", st.Name, req.User, pz.Reason, st.Name)})
	}
	c.Wake()
	return u, nil
}

// Approve records one person's approval of a bundle into a stage; the
// same person approving twice counts once. A bundle verified in the
// from-stage that is not waiting yet is recorded as waiting first.
func (c *Controller) Approve(ctx context.Context, pipeline, stage, bundle, by string) (Record, error) {
	if by == "" {
		return Record{}, errors.New("an approval needs the name of who approves")
	}
	p, err := c.pipeline(pipeline)
	if err != nil {
		return Record{}, err
	}
	st, ok := p.Stage(stage)
	if !ok {
		return Record{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no stage %q (stages: %s)", p.ID(), stage, stageNames(p)), "")
	}
	if st.Approvals == 0 {
		return Record{}, fluxerr.New(fluxerr.User, fmt.Errorf("stage %s asks for no approvals; promote into it with 'fluxctl promote --to %s'", st.Name, st.Name), "")
	}
	v, err := c.view(ctx, p)
	if err != nil {
		return Record{}, err
	}
	if bundle == "" {
		var waiting []Record
		for _, r := range stageRecords(v.Records, st.Name) {
			if r.Status == AwaitingApproval {
				waiting = append(waiting, r)
			}
		}
		switch len(waiting) {
		case 0:
			return Record{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("no bundle awaits approval for %s; 'fluxctl stages' shows what waits", st.Name), "")
		case 1:
			bundle = waiting[0].Bundle
		default:
			slices.SortFunc(waiting, func(a, b Record) int { return b.Created.Compare(a.Created) })
			return Record{}, fluxerr.New(fluxerr.User, fmt.Errorf("%d bundles await approval for %s (newest %s); name the one you approve", len(waiting), st.Name, waiting[0].Bundle), "")
		}
	}
	b, err := c.resolve(ctx, p, bundle)
	if err != nil {
		return Record{}, err
	}
	if _, ok := find(stageRecords(v.Records, st.Name), b.ID); !ok {
		if from, ok := find(stageRecords(v.Records, st.From), b.ID); !ok || from.Status != Verified {
			return Record{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s is not verified in %s, so it cannot be approved for %s", b.ID, st.From, st.Name), "")
		}
		if err := c.await(ctx, p, st, b.ID); err != nil {
			return Record{}, err
		}
	}
	if err := c.event(ctx, p, st, b.ID, Event{Kind: EvApproved, By: by}); err != nil {
		if errors.Is(err, ErrTransition) {
			r, _ := find(stageRecords(v.Records, st.Name), b.ID)
			return Record{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s does not await approval in %s: it is %s there", b.ID, st.Name, r.Status), "'fluxctl stages' shows what waits for approval.")
		}
		return Record{}, err
	}
	c.Wake()
	recs, err := c.cfg.Store.Records(ctx, p.ID())
	if err != nil {
		return Record{}, err
	}
	r, _ := find(stageRecords(recs, st.Name), b.ID)
	return r, nil
}

// Resume ends a stage's pause.
func (c *Controller) Resume(ctx context.Context, pipeline, stage, by string) error {
	p, err := c.pipeline(pipeline)
	if err != nil {
		return err
	}
	st, ok := p.Stage(stage)
	if !ok {
		return fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no stage %q (stages: %s)", p.ID(), stage, stageNames(p)), "")
	}
	pauses, err := c.cfg.Store.Pauses(ctx, p.ID())
	if err != nil {
		return err
	}
	if _, ok := pauses[st.Name]; !ok {
		return fluxerr.New(fluxerr.Precondition, fmt.Errorf("stage %s is not paused", st.Name), "")
	}
	if err := c.cfg.Store.SetPause(ctx, p.ID(), st.Name, nil); err != nil {
		return err
	}
	c.notice(ctx, Notice{Pipeline: p.ID(), Stage: st.Name, What: "resumed", By: by, Services: st.Services,
		Text: fmt.Sprintf("automatic promotion into %s resumed by %s", st.Name, by)})
	c.Wake()
	return nil
}

// firstService names a stage's first service, for a hint.
func firstService(st Stage) string {
	if len(st.Services) == 0 {
		return "SERVICE"
	}
	return st.Services[0].String()
}
