package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// promotionClient answers the promotion calls from memory and keeps the
// requests.
type promotionClient struct {
	fluxdv1.FluxServiceClient
	stages   *fluxdv1.ListStagesResponse
	bundles  *fluxdv1.ListBundlesResponse
	promotes []*fluxdv1.PromoteRequest
	approved *fluxdv1.ApproveRequest
}

func (c *promotionClient) ListStages(context.Context, *fluxdv1.ListStagesRequest, ...grpc.CallOption) (*fluxdv1.ListStagesResponse, error) {
	return c.stages, nil
}

func (c *promotionClient) ListBundles(context.Context, *fluxdv1.ListBundlesRequest, ...grpc.CallOption) (*fluxdv1.ListBundlesResponse, error) {
	return c.bundles, nil
}

func (c *promotionClient) Promote(_ context.Context, req *fluxdv1.PromoteRequest, _ ...grpc.CallOption) (*fluxdv1.PromoteResponse, error) {
	c.promotes = append(c.promotes, req)
	resp := &fluxdv1.PromoteResponse{Pipeline: "web", Stage: req.GetStage(), Bundle: "3f9a0c1d2e4b", Plan: &fluxdv1.Plan{Checksum: "sum-1", Revision: "0123456789abcdef",
		Items: []*fluxdv1.PlanItem{{Service: "team-prod:deployment/web", Action: "update",
			Updates: []*fluxdv1.ContainerUpdate{{Container: "app", Current: "reg.example/team/web:1.4.0", Target: "reg.example/team/web:1.5.0"}}}}}}
	if req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE {
		resp.JobId = "j-7"
	}
	return resp, nil
}

func (c *promotionClient) Approve(_ context.Context, req *fluxdv1.ApproveRequest, _ ...grpc.CallOption) (*fluxdv1.ApproveResponse, error) {
	c.approved = req
	return &fluxdv1.ApproveResponse{Approver: "alice", Approvals: 2,
		Record: &fluxdv1.BundleRecord{Stage: "prod", Bundle: "3f9a0c1d2e4b", Status: "awaiting approval", Approvers: []string{"alice"}}}, nil
}

var promotionNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func promotionFixture() *promotionClient {
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(promotionNow.Add(-d)) }
	digest := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	return &promotionClient{
		stages: &fluxdv1.ListStagesResponse{Pipeline: "web", Stages: []*fluxdv1.StageStatus{
			{Name: "dev", Services: []string{"team-dev:deployment/web"},
				Current: &fluxdv1.BundleRecord{Stage: "dev", Bundle: "3f9a0c1d2e4b", Status: "verified", Current: true, Since: at(20 * time.Minute), PromotedBy: "fluxd"}},
			{Name: "staging", From: "dev", Services: []string{"team-staging:deployment/web"}, Checks: 1, ChecksPassed: 1, SoakLeftMs: 150_500,
				Current: &fluxdv1.BundleRecord{Stage: "staging", Bundle: "3f9a0c1d2e4b", Status: "soaking", Current: true, Passed: []string{"http-0"},
					RolledOut: at(3 * time.Minute), SoakUntil: timestamppb.New(promotionNow.Add(150 * time.Second)), PromotedBy: "fluxd"}},
			{Name: "prod", From: "staging", Services: []string{"team-prod:deployment/web"}, Approvals: 2,
				Current: &fluxdv1.BundleRecord{Stage: "prod", Bundle: "77aa01bc9d3e", Status: "failed", Reason: "check http-0: GET http://web.team-prod/healthz: 503", Current: true, PromotedBy: "bob"},
				Waiting: []*fluxdv1.BundleRecord{{Stage: "prod", Bundle: "a1b2c3d4e5f6", Status: "awaiting approval", Approvers: []string{"alice"}}},
				Paused:  &fluxdv1.StagePause{By: "bob", Reason: "promoted 77aa01bc9d3e by hand", Since: at(2 * time.Hour)},
				Locked:  "incident 42"},
		}},
		bundles: &fluxdv1.ListBundlesResponse{Pipeline: "web", Bundles: []*fluxdv1.BundleStatus{
			{Id: "77aa01bc9d3e", Created: at(48 * time.Hour), Stage: "dev",
				Images: []*fluxdv1.BundleImage{{Repository: "reg.example/team/web", Tag: "1.4.0", Digest: digest("7")}},
				Records: []*fluxdv1.BundleRecord{{Stage: "dev", Bundle: "77aa01bc9d3e", Status: "superseded"}, {Stage: "staging", Bundle: "77aa01bc9d3e", Status: "verified"},
					{Stage: "prod", Bundle: "77aa01bc9d3e", Status: "failed", Current: true}}},
			{Id: "3f9a0c1d2e4b", Created: at(25 * time.Minute), Stage: "dev",
				Images:  []*fluxdv1.BundleImage{{Repository: "reg.example/team/sidecar", Tag: "2.0", Digest: digest("2")}, {Repository: "reg.example/team/web", Tag: "1.5.0", Digest: digest("3")}},
				Records: []*fluxdv1.BundleRecord{{Stage: "dev", Bundle: "3f9a0c1d2e4b", Status: "verified", Current: true}, {Stage: "staging", Bundle: "3f9a0c1d2e4b", Status: "soaking", Current: true}}},
		}},
	}
}

// stages and bundles, as a table, JSON and YAML (the golden files under
// testdata: go test -update rewrites them).
func TestStagesAndBundlesOutput(t *testing.T) {
	c := promotionFixture()
	for _, o := range outputs {
		t.Run("stages-"+o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runStages(context.Background(), &buf, c, "", o, promotionNow); err != nil {
				t.Fatal(err)
			}
			golden(t, "stages."+o, buf.Bytes())
		})
		t.Run("bundles-"+o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runBundles(context.Background(), &buf, c, "", o, promotionNow); err != nil {
				t.Fatal(err)
			}
			golden(t, "bundles."+o, buf.Bytes())
		})
	}
}

// promote plans, asks, and executes exactly the bundle and plan shown
// (its checksum); "n" changes nothing; --dry-run only plans; without a
// terminal and without -y it refuses after planning.
func TestPromoteConfirms(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dryRun      bool
		noWait      bool
		answer      string
		interactive bool
		wantKinds   []fluxdv1.ReleaseKind
		wantErr     string
		wantOut     string
	}{
		{name: "dry run", dryRun: true, wantKinds: []fluxdv1.ReleaseKind{fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}, wantOut: "Dry run: nothing was changed"},
		{name: "no", answer: "n\n", interactive: true, wantKinds: []fluxdv1.ReleaseKind{fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}, wantOut: "Promotion cancelled"},
		{name: "yes", answer: "\n", interactive: true, noWait: true,
			wantKinds: []fluxdv1.ReleaseKind{fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE}, wantOut: "Job j-7 queued"},
		{name: "no terminal", wantKinds: []fluxdv1.ReleaseKind{fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}, wantErr: "needs a confirmation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := promotionFixture()
			pf := &promoteFlags{dryRun: tc.dryRun, noWait: tc.noWait}
			pf.req.Stage, pf.req.User = "prod", "alice"
			var out bytes.Buffer
			err := runPromote(context.Background(), strings.NewReader(tc.answer), &out, c, pf, tc.interactive)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var kinds []fluxdv1.ReleaseKind
			for _, r := range c.promotes {
				kinds = append(kinds, r.GetKind())
			}
			if diff := cmp.Diff(tc.wantKinds, kinds); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(out.String(), "Container app: reg.example/team/web:1.4.0 -> 1.5.0") && tc.wantErr == "" {
				t.Errorf("output:\n%s", out.String())
			}
			if len(kinds) == 2 {
				exec := c.promotes[1]
				if exec.GetChecksum() != "sum-1" || exec.GetBundle() != "3f9a0c1d2e4b" || exec.GetStage() != "prod" {
					t.Errorf("execution %v: want the plan's checksum and bundle", exec)
				}
			}
		})
	}
}

// approve sends no approver (fluxd takes the token's holder) and says
// where the count stands.
func TestApproveOutput(t *testing.T) {
	c := promotionFixture()
	var out bytes.Buffer
	if err := runApprove(context.Background(), &out, c, "", "prod", ""); err != nil {
		t.Fatal(err)
	}
	if want := "Approved bundle 3f9a0c1d2e4b into stage prod as alice: 1 of 2 approvals (alice).\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if c.approved.GetStage() != "prod" || c.approved.GetBundle() != "" {
		t.Errorf("request %v", c.approved)
	}
}
