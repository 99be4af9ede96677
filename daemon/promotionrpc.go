package daemon

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fluxd/fluxd/promotion"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// The promotion calls: thin, over Daemon's operations (promotion.go).

// ListPipelines lists the pipelines, with the stages the caller may see.
func (s *Server) ListPipelines(ctx context.Context, _ *fluxdv1.ListPipelinesRequest) (*fluxdv1.ListPipelinesResponse, error) {
	ps, err := s.d.ListPipelines(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ListPipelinesResponse{}
	for _, p := range ps {
		resp.Pipelines = append(resp.Pipelines, &fluxdv1.Pipeline{Name: p.Name, Namespace: p.Namespace, File: p.File, Line: int32(p.Line), Stages: p.StageNames()})
	}
	return resp, nil
}

// ListStages reports a pipeline's stages the caller may see.
func (s *Server) ListStages(ctx context.Context, req *fluxdv1.ListStagesRequest) (*fluxdv1.ListStagesResponse, error) {
	name, sts, err := s.d.Stages(ctx, req.GetPipeline())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ListStagesResponse{Pipeline: name}
	for _, st := range sts {
		resp.Stages = append(resp.Stages, stageToProto(st))
	}
	return resp, nil
}

// ListBundles lists a pipeline's bundles, as far as the caller may see.
func (s *Server) ListBundles(ctx context.Context, req *fluxdv1.ListBundlesRequest) (*fluxdv1.ListBundlesResponse, error) {
	name, bs, err := s.d.Bundles(ctx, req.GetPipeline())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ListBundlesResponse{Pipeline: name}
	for _, b := range bs {
		pb := &fluxdv1.BundleStatus{Id: b.Bundle.ID, Created: timeToProto(b.Bundle.Created), Stage: b.Bundle.Stage}
		for _, img := range b.Bundle.Images {
			pb.Images = append(pb.Images, &fluxdv1.BundleImage{Repository: img.Repository, Tag: img.Tag, Digest: img.Digest})
		}
		for _, r := range b.Stages {
			pb.Records = append(pb.Records, recordToProto(r))
		}
		resp.Bundles = append(resp.Bundles, pb)
	}
	return resp, nil
}

// Promote plans a promotion, or queues it as a job.
func (s *Server) Promote(ctx context.Context, req *fluxdv1.PromoteRequest) (*fluxdv1.PromoteResponse, error) {
	if req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_UNSPECIFIED {
		return nil, status.Error(codes.InvalidArgument, "promotion kind is unspecified: ask for a plan or an execution")
	}
	res, err := s.d.Promote(ctx, identity(ctx), PromoteRequest{
		Pipeline: req.GetPipeline(), Stage: req.GetStage(), Bundle: req.GetBundle(), User: req.GetUser(), Force: req.GetForce(),
		Execute: req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Checksum: req.GetChecksum(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.PromoteResponse{Pipeline: res.Pipeline, Stage: res.Stage, Bundle: res.Bundle, Plan: planToProto(res.Plan)}
	if res.Job != nil {
		resp.JobId = res.Job.Job.ID
	}
	return resp, nil
}

// Approve approves a bundle into a stage as the token's holder.
func (s *Server) Approve(ctx context.Context, req *fluxdv1.ApproveRequest) (*fluxdv1.ApproveResponse, error) {
	res, err := s.d.Approve(ctx, identity(ctx), req.GetPipeline(), req.GetStage(), req.GetBundle())
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.ApproveResponse{Record: recordToProto(res.Record), Approvals: int32(res.Approvals), Approver: res.Approver}, nil
}

// ResumeStage ends a pause of automatic promotion into a stage.
func (s *Server) ResumeStage(ctx context.Context, req *fluxdv1.ResumeStageRequest) (*fluxdv1.ResumeStageResponse, error) {
	if _, _, err := s.d.Resume(ctx, identity(ctx), req.GetPipeline(), req.GetStage()); err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.ResumeStageResponse{}, nil
}

func stageToProto(st promotion.StageStatus) *fluxdv1.StageStatus {
	out := &fluxdv1.StageStatus{
		Name: st.Stage, From: st.From, Services: st.Services,
		ChecksPassed: int32(st.ChecksPassed), Checks: int32(st.Checks), SoakLeftMs: st.SoakLeft.Milliseconds(),
		Approvals: int32(st.Approvals), Locked: st.Locked, Hold: st.Hold,
	}
	if st.Current != nil {
		out.Current = recordToProto(*st.Current)
	}
	for _, r := range st.Waiting {
		out.Waiting = append(out.Waiting, recordToProto(r))
	}
	if st.Paused != nil {
		out.Paused = &fluxdv1.StagePause{By: st.Paused.By, Reason: st.Paused.Reason, Since: timeToProto(st.Paused.Since)}
	}
	return out
}

func recordToProto(r promotion.Record) *fluxdv1.BundleRecord {
	return &fluxdv1.BundleRecord{
		Stage: r.Stage, Bundle: r.Bundle, Status: string(r.Status), Reason: r.Reason,
		Created: timeToProto(r.Created), Since: timeToProto(r.Since), RolledOut: timeToProto(r.RolledOut), SoakUntil: timeToProto(r.SoakUntil),
		Passed: r.Passed, Approvers: r.Approvers, PromotedBy: r.PromotedBy, Current: r.Current,
	}
}

// timeToProto is t, or nil for the zero time.
func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
