package daemon

import (
	"context"

	"google.golang.org/grpc"

	"github.com/fluxd/fluxd/internal/fluxerr"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// The methods below are declared by the API and built by later issues.
// Each answers codes.Unimplemented with a message naming what is missing,
// never a fake success.

const (
	issueSafety     = "issue [release-safety]"
	issueAutomation = "issue [automation]"
	issueRegistry   = "issue [registry]"
)

func notBuilt(what, issue string) error { return toStatus(fluxerr.NotImplemented(what, issue)) }

func (s *Server) GetJob(context.Context, *fluxdv1.GetJobRequest) (*fluxdv1.GetJobResponse, error) {
	return nil, notBuilt("GetJob", issueSafety)
}

func (s *Server) WatchJob(*fluxdv1.WatchJobRequest, grpc.ServerStreamingServer[fluxdv1.WatchJobResponse]) error {
	return notBuilt("WatchJob", issueSafety)
}

func (s *Server) CancelJob(context.Context, *fluxdv1.CancelJobRequest) (*fluxdv1.CancelJobResponse, error) {
	return nil, notBuilt("CancelJob", issueSafety)
}

func (s *Server) ListJobs(context.Context, *fluxdv1.ListJobsRequest) (*fluxdv1.ListJobsResponse, error) {
	return nil, notBuilt("ListJobs", issueSafety)
}

func (s *Server) SetPolicy(context.Context, *fluxdv1.SetPolicyRequest) (*fluxdv1.SetPolicyResponse, error) {
	return nil, notBuilt("SetPolicy (tag filters)", issueAutomation)
}

func (s *Server) NotifyImage(context.Context, *fluxdv1.NotifyImageRequest) (*fluxdv1.NotifyImageResponse, error) {
	return nil, notBuilt("NotifyImage", issueRegistry)
}
