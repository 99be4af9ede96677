package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// releaseClient plans one update and records executions.
type releaseClient struct {
	fluxdv1.FluxServiceClient
	executed []*fluxdv1.ReleaseRequest
}

func (c *releaseClient) Release(_ context.Context, req *fluxdv1.ReleaseRequest, _ ...grpc.CallOption) (*fluxdv1.ReleaseResponse, error) {
	plan := &fluxdv1.Plan{Checksum: "sum1", Items: []*fluxdv1.PlanItem{
		{Service: "default:deployment/helloworld", Action: "update", Updates: []*fluxdv1.ContainerUpdate{{Container: "hello", Current: "registry/helloworld:1.0.0", Target: "registry/helloworld:1.1.0"}}},
		{Service: "default:deployment/foobar", Action: "uptodate", Reason: "container hello already uses registry/helloworld:1.1.0"},
	}}
	if req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE {
		c.executed = append(c.executed, req)
		return &fluxdv1.ReleaseResponse{Plan: plan, JobId: "job1"}, nil
	}
	return &fluxdv1.ReleaseResponse{Plan: plan}, nil
}

func (c *releaseClient) WatchJob(context.Context, *fluxdv1.WatchJobRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[fluxdv1.WatchJobResponse], error) {
	return &doneStream{}, nil
}

type doneStream struct {
	grpc.ClientStream
	sent bool
}

func (s *doneStream) Recv() (*fluxdv1.WatchJobResponse, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return &fluxdv1.WatchJobResponse{Job: &fluxdv1.Job{Id: "job1", State: fluxdv1.JobState_JOB_STATE_SUCCEEDED, Stage: "done", Commit: "abcdef1234567890"}}, nil
}

func (s *doneStream) Header() (metadata.MD, error) { return nil, nil }

func TestReleasePromptsOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		answer   string
		executes bool
	}{{"\n", true}, {"y\n", true}, {"YES\n", true}, {"n\n", false}, {"nope\n", false}} {
		c := &releaseClient{}
		var out bytes.Buffer
		rf := &releaseFlags{spec: fluxdv1.ReleaseSpec{All: true, Image: "registry/helloworld:1.1.0"}}
		if err := runRelease(context.Background(), strings.NewReader(tc.answer), &out, c, rf, true); err != nil {
			t.Fatal(err)
		}
		want := `This will result in the following changes:
Service default:deployment/helloworld
  Container hello: registry/helloworld:1.0.0 -> 1.1.0
Service default:deployment/foobar
  Container hello already uses registry/helloworld:1.1.0

Do you want to proceed? [Y/n] `
		if !strings.HasPrefix(out.String(), want) {
			t.Errorf("answer %q: output\n%s\nwant it to start with\n%s", tc.answer, out.String(), want)
		}
		if got := len(c.executed) == 1; got != tc.executes {
			t.Fatalf("answer %q: executed %v, want %v", tc.answer, got, tc.executes)
		}
		if tc.executes {
			if c.executed[0].GetChecksum() != "sum1" {
				t.Errorf("executed without the confirmed checksum: %v", c.executed[0])
			}
			if !strings.Contains(out.String(), "Released: commit abcdef123456") {
				t.Errorf("output:\n%s", out.String())
			}
		} else if !strings.Contains(out.String(), "nothing was changed") {
			t.Errorf("declined output:\n%s", out.String())
		}
	}
}

func TestReleaseWithoutATerminalNeedsYes(t *testing.T) {
	c := &releaseClient{}
	err := runRelease(context.Background(), strings.NewReader(""), io.Discard, c, &releaseFlags{spec: fluxdv1.ReleaseSpec{All: true, AllLatest: true}}, false)
	if err == nil || !strings.Contains(err.Error(), "-y") || len(c.executed) != 0 {
		t.Fatalf("err = %v, executed %d", err, len(c.executed))
	}
	var out bytes.Buffer
	if err := runRelease(context.Background(), nil, &out, c, &releaseFlags{spec: fluxdv1.ReleaseSpec{All: true, AllLatest: true}, yes: true, noWait: true}, false); err != nil {
		t.Fatal(err)
	}
	if len(c.executed) != 1 || c.executed[0].GetChecksum() != "" || !strings.Contains(out.String(), "Job job1 queued") {
		t.Errorf("-y --no-wait: executed %v\n%s", c.executed, out.String())
	}
}

// The plan shows each update's signature verification and the item's
// warnings (newer images skipped, and why).
func TestReleasePlanShowsVerification(t *testing.T) {
	var out bytes.Buffer
	printPlan(&out, &fluxdv1.Plan{Items: []*fluxdv1.PlanItem{
		{Service: "default:deployment/web", Action: "update", Warnings: []string{"web: skipped newer images that do not pass signature verification: reg/web:1.3.0 (unsigned: profile signed: unsigned: no cosign signature for sha256:44); releasing reg/web:1.2.0, the newest that does"},
			Updates: []*fluxdv1.ContainerUpdate{
				{Container: "web", Current: "reg/web:1.0.0", Target: "reg/web:1.2.0", Verification: &fluxdv1.Verification{Outcome: "verified", Digest: "sha256:33", Detail: "profile signed: verified by key sha256:ab (/etc/fluxd/cosign.pub)"}},
				{Container: "sidecar", Current: "reg/envoy:1", Target: "reg/envoy:2", Verification: &fluxdv1.Verification{Outcome: "not-required"}},
				{Container: "tool", Current: "reg/tool:1", Target: "reg/tool:2", Verification: &fluxdv1.Verification{Outcome: "failed", Digest: "sha256:55", Detail: "profile signed: failed (wrong-key): 1 signature(s), none by the key(s) of profile \"signed\""}},
			}},
	}}, "Plan:")
	want := `Plan:
Service default:deployment/web
  Container web: reg/web:1.0.0 -> 1.2.0
    Signature: profile signed: verified by key sha256:ab (/etc/fluxd/cosign.pub) at sha256:33
  Container sidecar: reg/envoy:1 -> 2
    Signature: not required (no verification profile applies)
  Container tool: reg/tool:1 -> 2
    Signature: FAILED: profile signed: failed (wrong-key): 1 signature(s), none by the key(s) of profile "signed" (at sha256:55)
  Warning: web: skipped newer images that do not pass signature verification: reg/web:1.3.0 (unsigned: profile signed: unsigned: no cosign signature for sha256:44); releasing reg/web:1.2.0, the newest that does
`
	if out.String() != want {
		t.Errorf("plan:\n%s\nwant:\n%s", out.String(), want)
	}
}
