package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// oneJobClient streams one final job state.
type oneJobClient struct {
	fluxdv1.FluxServiceClient
	job *fluxdv1.Job
}

func (c *oneJobClient) WatchJob(context.Context, *fluxdv1.WatchJobRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[fluxdv1.WatchJobResponse], error) {
	return &oneJobStream{job: c.job}, nil
}

type oneJobStream struct {
	doneStream
	job *fluxdv1.Job
}

func (s *oneJobStream) Recv() (*fluxdv1.WatchJobResponse, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return &fluxdv1.WatchJobResponse{Job: s.job}, nil
}

// A job whose release nothing reported on (a HelmRelease with no
// helm-controller) is not printed as rolled out.
func TestFollowJobNotRolledOut(t *testing.T) {
	job := &fluxdv1.Job{Id: "j1", State: fluxdv1.JobState_JOB_STATE_SUCCEEDED, Stage: stageNotRolledOut, Commit: "abcdef1234567890",
		Error: "committed and applied, not rolled out: nothing reported on the rollout of default:helmrelease/web within 5m0s"}
	var out bytes.Buffer
	if err := followJob(context.Background(), &out, &oneJobClient{job: job}, "j1", false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "Committed and applied, NOT rolled out: commit abcdef123456 pushed and applied; nothing reported on the rollout of default:helmrelease/web") || strings.Contains(got, "and rolled out") {
		t.Errorf("fluxctl says:\n%s", got)
	}
}

// A job that succeeded with no commit (its services were up to date by
// its turn) is not reported as "Released: commit  pushed".
func TestFollowJobThatCommittedNothing(t *testing.T) {
	job := &fluxdv1.Job{Id: "j2", State: fluxdv1.JobState_JOB_STATE_SUCCEEDED, Stage: "done"}
	var out bytes.Buffer
	if err := followJob(context.Background(), &out, &oneJobClient{job: job}, "j2", false); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "Nothing released") || strings.Contains(got, "Released: commit") {
		t.Errorf("fluxctl says:\n%s", got)
	}
}
