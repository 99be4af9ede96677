package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCancelledErrorSaysItOnce(t *testing.T) {
	t.Parallel()
	for why, want := range map[string]string{
		"cancelled while queued":                  "job j1 was cancelled while queued",
		"cancelled: cancelled by a user":          "job j1 was cancelled by a user",
		"cancelled: stopped before its push: x y": "job j1 was cancelled: stopped before its push: x y",
	} {
		if got := cancelledError("j1", why).Error(); got != want {
			t.Errorf("%q: %q; want %q", why, got, want)
		}
	}
}

func sampleJob(t0 time.Time) *fluxdv1.Job {
	return &fluxdv1.Job{Id: "j-7", State: fluxdv1.JobState_JOB_STATE_SUCCEEDED, Stage: "done", Type: "release", User: "Jane Doe <jane@example.com>",
		CreatedAt: timestamppb.New(t0), FinishedAt: timestamppb.New(t0.Add(83 * time.Second)), Commit: "0123456789abcdef",
		Plan: &fluxdv1.Plan{Items: []*fluxdv1.PlanItem{
			{Service: "default:deployment/web", Action: "update", Updates: []*fluxdv1.ContainerUpdate{{Container: "app", Current: "reg/web:1.0", Target: "reg/web:1.1"}}},
			{Service: "default:deployment/api", Action: "update", Updates: []*fluxdv1.ContainerUpdate{{Container: "app", Current: "reg/api:2.0", Target: "reg/api:2.1"}}},
		}}}
}

// jobs and job say what a job changed, who asked, its type and how long it
// took, in the table and in JSON.
func TestJobsSayWhatAndWho(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := printJobs(&out, []*fluxdv1.Job{sampleJob(t0)}, "table", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TYPE", "USER", "TOOK", "CHANGES", "release", "Jane Doe <jane@example.com>", "1m23s", "web app: reg/web:1.0 -> 1.1 (+1 more)", "0123456789ab"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("jobs table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printJobs(&out, []*fluxdv1.Job{sampleJob(t0)}, "json", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type": "release"`, `"durationSeconds": 83`, `"from": "reg/api:2.0"`, `"to": "reg/api:2.1"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("jobs JSON lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printJob(&out, sampleJob(t0), t0.Add(time.Hour))
	for _, want := range []string{"Job:", "j-7", "User:", "Ended:", "after 1m23s", "default:deployment/api app: reg/api:2.0 -> 2.1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("job view lacks %q:\n%s", want, out.String())
		}
	}
}

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
