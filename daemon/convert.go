package daemon

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// Conversions between domain types and protobuf live here, and only here.

func roleToProto(r auth.Role) fluxdv1.Role {
	switch r {
	case auth.Viewer:
		return fluxdv1.Role_ROLE_VIEWER
	case auth.Deployer:
		return fluxdv1.Role_ROLE_DEPLOYER
	case auth.Admin:
		return fluxdv1.Role_ROLE_ADMIN
	}
	return fluxdv1.Role_ROLE_UNSPECIFIED
}

func serviceToProto(s Service) *fluxdv1.Service {
	out := &fluxdv1.Service{
		Id:            s.ID.String(),
		Status:        s.Status,
		InGit:         s.InGit,
		Automated:     s.Automated,
		Locked:        s.Locked,
		LockMessage:   s.LockMsg,
		Replicas:      replicasToProto(s.Replicas),
		TagFilters:    s.Filters,
		TagOrder:      s.TagOrder,
		TagPrerelease: s.Prerelease,
		Warnings:      s.Warnings,
		SyncState:     s.SyncState,
		SyncDetail:    s.SyncDetail,
	}
	if a := s.Automation; a != nil {
		out.Automation = &fluxdv1.Automation{State: string(a.State), JobId: a.JobID, LastError: a.LastError, Failures: int32(a.Failures), Decision: a.Decision}
		if !a.Next.IsZero() {
			out.Automation.Next = timestamppb.New(a.Next)
		}
		if !a.LastCheck.IsZero() {
			out.Automation.LastCheck = timestamppb.New(a.LastCheck)
		}
	}
	for _, c := range s.Containers {
		out.Containers = append(out.Containers, &fluxdv1.Container{Name: c.Name, Image: c.Image, Init: c.Init, Goal: s.Goals[c.Name], GitImage: s.GitImages[c.Name]})
	}
	if s.Locked {
		out.LockedBy = s.annotations[release.AnnotationLockedBy]
		if t, err := time.Parse(time.RFC3339, s.annotations[release.AnnotationLockedAt]); err == nil {
			out.LockedAt = timestamppb.New(t)
		}
	}
	return out
}

// serviceImagesToProto converts list-images results, keeping at most limit
// images per container (0: all) from offset, and the running one.
func serviceImagesToProto(s Service, cis []ContainerImages, offset, limit int) *fluxdv1.ServiceImages {
	out := &fluxdv1.ServiceImages{Service: s.ID.String()}
	for _, ci := range cis {
		c := &fluxdv1.ContainerImages{Container: ci.Container, Current: ci.Current, Filter: ci.Filter, Best: ci.Best, Warnings: ci.Warnings,
			Total: int32(len(ci.Available)), Refreshing: ci.Refresh.Refreshing, RefreshError: ci.Refresh.LastError, TimesRead: int32(ci.Read)}
		if !ci.Refresh.RefreshedAt.IsZero() && (ci.Refresh.Refreshing || ci.Refresh.LastError != "") {
			c.RefreshedAt = timestamppb.New(ci.Refresh.RefreshedAt)
		}
		if ci.Err != nil {
			c.Error = ci.Err.Error()
		}
		shown := map[string]bool{}
		for i, img := range ci.Available {
			if (i < offset || (limit > 0 && i >= offset+limit)) && img.Ref() != ci.Current {
				continue
			}
			shown[img.Tag] = true
			info := &fluxdv1.ImageInfo{Ref: img.Ref(), Tag: img.Tag, Digest: img.Digest, Reading: img.Digest == ""}
			if img.Dated() {
				info.CreatedAt = timestamppb.New(img.CreatedAt)
			}
			if v, ok := ci.Verified[img.Tag]; ok {
				info.Verification = verificationToProto(v)
			}
			c.Available = append(c.Available, info)
		}
		// The ranking of what is shown (and the best, always).
		for _, t := range ci.Passing {
			if shown[t] || t == ci.Best {
				c.Passing = append(c.Passing, t)
			}
		}
		out.Containers = append(out.Containers, c)
	}
	return out
}

func verificationToProto(v release.Verification) *fluxdv1.Verification {
	return &fluxdv1.Verification{Outcome: v.Outcome, Profiles: v.Profiles, Digest: v.Digest, Detail: v.Detail}
}

func releaseRequestFromProto(r *fluxdv1.ReleaseRequest) ReleaseRequest {
	s := r.GetSpec()
	return ReleaseRequest{
		Services: s.GetServices(), All: s.GetAll(), Exclude: s.GetExclude(),
		Image: s.GetImage(), AllLatest: s.GetAllLatest(),
		User: s.GetUser(), Message: s.GetMessage(), Force: s.GetForce(), Files: s.GetFiles(),
		Execute:           r.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE,
		Checksum:          r.GetChecksum(),
		RollbackOnFailure: r.GetRollbackOnFailure(),
		RolloutTimeout:    time.Duration(r.GetRolloutTimeoutSeconds()) * time.Second,
		Cached:            s.GetCached(),
		AllowUnverified:   s.GetAllowUnverified(),
	}
}

func replicasToProto(r platform.Replicas) *fluxdv1.ReplicaCounts {
	return &fluxdv1.ReplicaCounts{Desired: r.Desired, Updated: r.Updated, Ready: r.Ready, Available: r.Available}
}

var jobStates = map[history.JobState]fluxdv1.JobState{
	history.JobQueued:    fluxdv1.JobState_JOB_STATE_QUEUED,
	history.JobRunning:   fluxdv1.JobState_JOB_STATE_RUNNING,
	history.JobSucceeded: fluxdv1.JobState_JOB_STATE_SUCCEEDED,
	history.JobFailed:    fluxdv1.JobState_JOB_STATE_FAILED,
	history.JobCancelled: fluxdv1.JobState_JOB_STATE_CANCELLED,
}

func jobToProto(u jobs.JobUpdate) *fluxdv1.Job {
	j := u.Job
	out := &fluxdv1.Job{
		Id: j.ID, State: jobStates[j.State], Stage: j.Stage, Error: j.Error, Commit: j.Commit,
		QueuePosition: int32(u.Position), CreatedAt: timestamppb.New(j.CreatedAt),
	}
	if !j.FinishedAt.IsZero() {
		out.FinishedAt = timestamppb.New(j.FinishedAt)
	}
	var p release.Plan
	if len(j.Plan) > 2 && json.Unmarshal(j.Plan, &p) == nil {
		out.Plan = planToProto(&p)
	}
	var spec release.Spec
	if len(j.Spec) > 2 && json.Unmarshal(j.Spec, &spec) == nil {
		out.User, out.Type = spec.User, string(history.Release)
		if spec.Automated {
			out.Type = string(history.AutomatedRelease)
		}
	}
	return out
}

func planToProto(p *release.Plan) *fluxdv1.Plan {
	out := &fluxdv1.Plan{Revision: p.Revision, Checksum: p.Checksum}
	for _, it := range p.Items {
		pi := &fluxdv1.PlanItem{Service: it.Service.String(), Action: string(it.Action), Reason: it.Reason, Warnings: it.Warnings}
		for _, u := range it.Updates {
			cu := &fluxdv1.ContainerUpdate{Container: u.Container, Current: u.Current, Target: u.Target}
			if v := u.Verification; v.Outcome != "" {
				cu.Verification = verificationToProto(v)
			}
			pi.Updates = append(pi.Updates, cu)
		}
		out.Items = append(out.Items, pi)
	}
	return out
}

func eventToProto(ev history.Event) *fluxdv1.Event {
	out := &fluxdv1.Event{
		Id: ev.ID, Services: ev.Services, Type: string(ev.Type), Message: ev.Message, User: ev.User,
		StartedAt: timestamppb.New(ev.StartedAt), EndedAt: timestamppb.New(ev.EndedAt),
		Commit: ev.Commit, Error: ev.Error,
	}
	for _, c := range ev.Changes {
		pc := &fluxdv1.Change{Service: c.Service, Container: c.Container, From: c.From, To: c.To}
		if v := c.Verification; v != nil {
			pc.Verification = &fluxdv1.Verification{Outcome: v.Outcome, Profiles: v.Profiles, Digest: v.Digest, Detail: v.Detail}
		}
		out.Changes = append(out.Changes, pc)
	}
	return out
}

func gitStatusToProto(st gitrepo.RemoteStatus) *fluxdv1.GitRemoteStatus {
	out := &fluxdv1.GitRemoteStatus{Revision: st.Revision, Error: st.Error, Waiting: st.Waiting}
	if !st.LastSync.IsZero() {
		out.LastSync = timestamppb.New(st.LastSync)
	}
	if st.Waiting != "" {
		out.WaitingSince = timestamppb.New(st.WaitingSince)
	}
	return out
}

// WatchJobResponse is a job update as WatchJob streams it; the web page's
// live events carry the same.
func WatchJobResponse(u jobs.JobUpdate) *fluxdv1.WatchJobResponse {
	resp := &fluxdv1.WatchJobResponse{Job: jobToProto(u)}
	for _, w := range u.Workloads {
		resp.Workloads = append(resp.Workloads, &fluxdv1.WorkloadProgress{Service: w.Service.String(), Replicas: replicasToProto(w.Replicas)})
	}
	return resp
}

// JobLogLine is a job log line as GetJobLog returns it.
func JobLogLine(l history.JobLogLine) *fluxdv1.JobLogLine {
	return &fluxdv1.JobLogLine{JobId: l.JobID, Seq: l.Seq, Time: timestamppb.New(l.Time), Stage: l.Stage, Text: l.Text}
}
