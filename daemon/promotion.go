package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// Promotions is the promotion loop, as the daemon serves it
// (promotion.Controller, wired by cmd/fluxd into Deps.Promotions; nil
// when fluxd runs no pipelines: every promotion call then answers
// Unimplemented, saying so).
type Promotions interface {
	Pipelines(ctx context.Context) ([]promotion.Pipeline, error)
	Stages(ctx context.Context, pipeline string) ([]promotion.StageStatus, error)
	Bundles(ctx context.Context, pipeline string) ([]promotion.BundleStatus, error)
	PlanPromotion(ctx context.Context, req promotion.PromoteRequest) (release.Spec, *release.Plan, error)
	Promote(ctx context.Context, instance string, req promotion.PromoteRequest, checksum string) (jobs.JobUpdate, error)
	Approve(ctx context.Context, pipeline, stage, bundle, by string) (promotion.Record, error)
	Resume(ctx context.Context, pipeline, stage, by string) error
}

// Scopes and pipelines. A stage is the caller's when every one of its
// services is in the caller's view of services (servicesBuilt keeps a
// scoped caller's view to its scope): a scoped caller sees only such
// stages, promotes, approves and resumes only such stages, and sees only
// the bundles with a record in one of them. A stage of another team's
// is, to it, a stage that does not exist; a pipeline with none of its
// stages, a pipeline that does not exist.

// errNoPromotions is the answer of every promotion call when fluxd runs
// no promotion loop.
func errNoPromotions() error {
	return fluxerr.New(fluxerr.Unimplemented, errors.New("this fluxd runs no promotion pipelines"),
		"fluxd promotes bundles between stages only when it reads Pipeline objects (apiVersion fluxd.io/v1, kind Pipeline) under its --git-path. "+
			"Add one (docs/promotion.md shows the shape), push it, and ask again; 'fluxctl check' reports Pipelines it cannot read.")
}

// promotions returns the promotion loop, or errNoPromotions.
func (d *Daemon) promotions() (Promotions, error) {
	if d.deps.Promotions == nil {
		return nil, errNoPromotions()
	}
	return d.deps.Promotions, nil
}

// visibleStages says, per stage of p, whether the caller may see it:
// every stage without a scope; with one, the stages with services all in
// the caller's view.
func (d *Daemon) visibleStages(ctx context.Context, p promotion.Pipeline) (map[string]bool, error) {
	out := make(map[string]bool, len(p.Stages))
	if identity(ctx).Scope == nil {
		for _, st := range p.Stages {
			out[st.Name] = true
		}
		return out, nil
	}
	svcs, err := d.services(ctx)
	if err != nil {
		return nil, err
	}
	mine := make(map[platform.ID]bool, len(svcs))
	for _, s := range svcs {
		mine[s.ID] = true
	}
	for _, st := range p.Stages {
		ok := len(st.Services) > 0
		for _, id := range st.Services {
			ok = ok && mine[id]
		}
		out[st.Name] = ok
	}
	return out, nil
}

// scopedPipeline is a pipeline with the stages the caller may see.
type scopedPipeline struct {
	promotion.Pipeline
	visible map[string]bool
}

// Stage returns the named stage when the caller may see it.
func (p scopedPipeline) Stage(name string) (promotion.Stage, bool) {
	for _, st := range p.Stages {
		if st.Name == name && p.visible[st.Name] {
			return st, true
		}
	}
	return promotion.Stage{}, false
}

// StageNames are the names of the stages the caller may see, in order.
func (p scopedPipeline) StageNames() []string {
	var out []string
	for _, st := range p.Stages {
		if p.visible[st.Name] {
			out = append(out, st.Name)
		}
	}
	return out
}

// ListPipelines returns the pipelines with at least one stage the caller
// may see.
func (d *Daemon) ListPipelines(ctx context.Context) ([]scopedPipeline, error) {
	pr, err := d.promotions()
	if err != nil {
		return nil, err
	}
	all, err := pr.Pipelines(ctx)
	if err != nil {
		return nil, err
	}
	var out []scopedPipeline
	for _, p := range all {
		vis, err := d.visibleStages(ctx, p)
		if err != nil {
			return nil, err
		}
		sp := scopedPipeline{Pipeline: p, visible: vis}
		if len(sp.StageNames()) > 0 {
			out = append(out, sp)
		}
	}
	return out, nil
}

// pipeline returns the named pipeline, or with name empty the only one
// the caller may see. Name is the Pipeline object's name, or
// NAMESPACE/NAME where two namespaces hold one of that name.
func (d *Daemon) pipeline(ctx context.Context, name string) (scopedPipeline, error) {
	ps, err := d.ListPipelines(ctx)
	if err != nil {
		return scopedPipeline{}, err
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if len(ps) == 0 {
		inst := identity(ctx).Instance
		return scopedPipeline{}, fluxerr.New(fluxerr.Precondition, fmt.Errorf("there is no pipeline with a stage instance %s may see", inst),
			"fluxd reads Pipeline objects (kind Pipeline, apiVersion fluxd.io/v1) under its --git-path. Either there is none yet, or none has a stage whose services are all in your token's scope. 'fluxctl check' reports Pipelines fluxd cannot read.")
	}
	if name == "" {
		if len(ps) == 1 {
			return ps[0], nil
		}
		return scopedPipeline{}, fluxerr.New(fluxerr.User, fmt.Errorf("fluxd reads %d pipelines (%s): say which", len(ps), strings.Join(names, ", ")),
			"Give the pipeline: --pipeline NAME (fluxctl stages and bundles take it as their argument). 'fluxctl stages --help' says more.")
	}
	var found []scopedPipeline
	for _, p := range ps {
		if p.Name == name || p.Namespace+"/"+p.Name == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return scopedPipeline{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("there is no pipeline %q", name),
			fmt.Sprintf("The pipelines you may see are: %s.", strings.Join(names, ", ")))
	}
	var qualified []string
	for _, p := range found {
		qualified = append(qualified, p.Namespace+"/"+p.Name)
	}
	return scopedPipeline{}, fluxerr.New(fluxerr.User, fmt.Errorf("pipeline %q is defined in more than one namespace (%s)", name, strings.Join(qualified, ", ")),
		"Give it as NAMESPACE/NAME.")
}

// stage returns the named stage of the named pipeline, when the caller
// may see it: another team's stage is "not found", as one that does not
// exist is.
func (d *Daemon) stage(ctx context.Context, pipeline, stage string) (scopedPipeline, promotion.Stage, error) {
	p, err := d.pipeline(ctx, pipeline)
	if err != nil {
		return p, promotion.Stage{}, err
	}
	if stage == "" {
		return p, promotion.Stage{}, fluxerr.New(fluxerr.User, errors.New("no stage given"),
			fmt.Sprintf("Name the stage (--stage S, or --to S for promote); pipeline %s has %s.", p.Name, strings.Join(p.StageNames(), ", ")))
	}
	st, ok := p.Stage(stage)
	if !ok {
		return p, promotion.Stage{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no stage %q", p.Name, stage),
			fmt.Sprintf("Its stages you may see are: %s. 'fluxctl stages %s' shows them.", strings.Join(p.StageNames(), ", "), p.Name))
	}
	return p, st, nil
}

// Stages reports the stages of a pipeline the caller may see.
func (d *Daemon) Stages(ctx context.Context, pipeline string) (string, []promotion.StageStatus, error) {
	p, err := d.pipeline(ctx, pipeline)
	if err != nil {
		return "", nil, err
	}
	all, err := d.deps.Promotions.Stages(ctx, p.Name)
	if err != nil {
		return "", nil, err
	}
	out := make([]promotion.StageStatus, 0, len(all))
	for _, st := range all {
		if p.visible[st.Stage] {
			out = append(out, st)
		}
	}
	return p.Name, out, nil
}

// Bundles reports a pipeline's bundles, each with its records in the
// stages the caller may see; a bundle with none there is left out, so
// that a scoped caller never reads another team's images.
func (d *Daemon) Bundles(ctx context.Context, pipeline string) (string, []promotion.BundleStatus, error) {
	p, err := d.pipeline(ctx, pipeline)
	if err != nil {
		return "", nil, err
	}
	all, err := d.deps.Promotions.Bundles(ctx, p.Name)
	if err != nil {
		return "", nil, err
	}
	out := make([]promotion.BundleStatus, 0, len(all))
	for _, b := range all {
		b.Stages = slices.DeleteFunc(slices.Clone(b.Stages), func(r promotion.Record) bool { return !p.visible[r.Stage] })
		if len(b.Stages) == 0 && !p.visible[b.Bundle.Stage] {
			continue
		}
		out = append(out, b)
	}
	return p.Name, out, nil
}

// PromoteRequest is a promotion as asked for.
type PromoteRequest struct {
	Pipeline, Stage, Bundle string
	// User is who promotes, as the interceptors stamped it.
	User    string
	Force   bool
	Execute bool
	// Checksum, on an execution, must match the plan when it runs.
	Checksum string
}

// PromoteResult is a promotion's plan, and for an execution its job.
type PromoteResult struct {
	Pipeline, Stage, Bundle string
	Plan                    *release.Plan
	Job                     *jobs.JobUpdate
}

// Promote plans the promotion of a bundle into a stage the caller may
// see, or queues it as a release job. An execution is planned first, as
// a release is, so that a plan that no longer matches the confirmed
// checksum is refused before anything is queued.
func (d *Daemon) Promote(ctx context.Context, id auth.Identity, req PromoteRequest) (*PromoteResult, error) {
	p, st, err := d.stage(ctx, req.Pipeline, req.Stage)
	if err != nil {
		return nil, err
	}
	user := req.User
	if user == "" {
		user = actorOf(id)
	}
	preq := promotion.PromoteRequest{Pipeline: p.Name, Stage: st.Name, Bundle: req.Bundle, User: user, Force: req.Force}
	spec, plan, err := d.deps.Promotions.PlanPromotion(ctx, preq)
	if err != nil {
		return nil, err
	}
	res := &PromoteResult{Pipeline: p.Name, Stage: st.Name, Bundle: req.Bundle, Plan: plan}
	if spec.Promotion != nil {
		res.Bundle = spec.Promotion.Bundle
		// The execution promotes the bundle the plan showed, though a
		// newer one be verified meanwhile.
		preq.Bundle = spec.Promotion.Bundle
	}
	if !req.Execute {
		return res, nil
	}
	if req.Checksum != "" && req.Checksum != plan.Checksum {
		changed := ""
		if d.deps.Releaser != nil {
			changed = d.deps.Releaser.WhatChanged(req.Checksum, plan)
		}
		if changed == "" {
			changed = "its checksum is now " + plan.Checksum
		}
		return nil, fluxerr.New(fluxerr.Precondition, fmt.Errorf("the promotion plan you confirmed no longer matches: %s", changed),
			"Git, the registry or the cluster changed since you saw the plan. Nothing was changed; look at the new plan and confirm it again.")
	}
	// With nothing to write the loop still hears of it: it records the
	// bundle as the stage's, and runs its checks again (a bundle that
	// failed them, promoted again with --force).
	d.invalidate()
	job, err := d.deps.Promotions.Promote(ctx, id.Instance, preq, plan.Checksum)
	if err != nil {
		return nil, err
	}
	if job.Job.ID != "" {
		res.Job = &job
	}
	return res, nil
}

// ApproveResult is a bundle's record after an approval.
type ApproveResult struct {
	Record promotion.Record
	// Approvals is how many the stage asks for; Approver who the
	// approval counts as.
	Approvals int
	Approver  string
}

// Approve approves a bundle into a stage the caller may see, as the
// token's holder (never a name the caller gives: the same holder
// approving twice counts once). With bundle empty, the one bundle
// awaiting approval in the stage is approved.
func (d *Daemon) Approve(ctx context.Context, id auth.Identity, pipeline, stage, bundle string) (*ApproveResult, error) {
	p, st, err := d.stage(ctx, pipeline, stage)
	if err != nil {
		return nil, err
	}
	if bundle == "" {
		if bundle, err = d.awaitingApproval(ctx, p.Name, st.Name); err != nil {
			return nil, err
		}
	}
	by := actorOf(id)
	rec, err := d.deps.Promotions.Approve(ctx, p.Name, st.Name, bundle, by)
	if err != nil {
		return nil, err
	}
	d.log.Info("bundle approved", "pipeline", p.Name, "stage", st.Name, "bundle", rec.Bundle, "by", by, "approvals", len(rec.Approvers), "of", st.Approvals)
	return &ApproveResult{Record: rec, Approvals: st.Approvals, Approver: by}, nil
}

// awaitingApproval is the one bundle awaiting approval in a stage.
func (d *Daemon) awaitingApproval(ctx context.Context, pipeline, stage string) (string, error) {
	sts, err := d.deps.Promotions.Stages(ctx, pipeline)
	if err != nil {
		return "", err
	}
	var waiting []string
	for _, s := range sts {
		if s.Stage != stage {
			continue
		}
		for _, r := range s.Waiting {
			if r.Status == promotion.AwaitingApproval {
				waiting = append(waiting, r.Bundle)
			}
		}
	}
	switch len(waiting) {
	case 1:
		return waiting[0], nil
	case 0:
		return "", fluxerr.New(fluxerr.Precondition, fmt.Errorf("no bundle awaits approval in stage %s of pipeline %s", stage, pipeline),
			fmt.Sprintf("'fluxctl stages %s' shows what each stage waits for; 'fluxctl bundles %s' lists the bundles. Name a bundle to approve it ahead of time.", pipeline, pipeline))
	}
	return "", fluxerr.New(fluxerr.User, fmt.Errorf("%d bundles await approval in stage %s (%s): say which", len(waiting), stage, strings.Join(waiting, ", ")),
		"Give the bundle's ID (or a unique prefix) after the command: fluxctl approve --stage "+stage+" BUNDLE.")
}

// Resume ends a pause of automatic promotion into a stage the caller may
// see.
func (d *Daemon) Resume(ctx context.Context, id auth.Identity, pipeline, stage string) (string, string, error) {
	p, st, err := d.stage(ctx, pipeline, stage)
	if err != nil {
		return "", "", err
	}
	if err := d.deps.Promotions.Resume(ctx, p.Name, st.Name, actorOf(id)); err != nil {
		return "", "", err
	}
	return p.Name, st.Name, nil
}

// actorOf names who acts for a token: its holder's name (fluxd token
// create --name), else the instance's token. Two tokens of an instance
// made without names count as one approver: approvals counted by name
// must not be multiplied by making tokens.
func actorOf(id auth.Identity) string {
	if id.Name != "" {
		return id.Name
	}
	return "instance:" + id.Instance
}
