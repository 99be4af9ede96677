package daemon

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// The promotion suite's world is the scope suite's: team a's service in
// namespace a, another team's in namespace b. Pipeline "web" runs dev on
// team a's service and prod on the other team's; pipeline "api" has one
// stage, on the other team's service. Team a's instance is scoped to
// namespace a; team b's is not scoped.
func promotionPipelines() []promotion.Pipeline {
	return []promotion.Pipeline{
		{Name: "web", Namespace: "team", File: "pipelines/web.yaml", Line: 1, Stages: []promotion.Stage{
			{Name: "dev", Services: []platform.ID{scopeMine}},
			{Name: "prod", From: "dev", Services: []platform.ID{scopeTheirs}, Approvals: 2},
		}},
		{Name: "api", Namespace: "team", File: "pipelines/api.yaml", Line: 1, Stages: []promotion.Stage{
			{Name: "live", Services: []platform.ID{scopeTheirs}},
		}},
	}
}

// fakePromotions answers from memory. Its approvals go through the real
// state machine (promotion.Advance), which counts each approver once.
type fakePromotions struct {
	mu        sync.Mutex
	awaiting  promotion.Record // the bundle awaiting approval in prod
	approvals []string         // every by Approve was called with
	resumed   []string         // stage/by of every Resume
	promoted  []promotion.PromoteRequest
	checksum  string // the plan's
}

func newFakePromotions() *fakePromotions {
	return &fakePromotions{checksum: "sum-1", awaiting: promotion.Record{Pipeline: "web", Stage: "prod", Bundle: "bbbbbbbbbbbb", Status: promotion.AwaitingApproval}}
}

func (f *fakePromotions) Pipelines(context.Context) ([]promotion.Pipeline, error) {
	return promotionPipelines(), nil
}

func (f *fakePromotions) Stages(_ context.Context, pipeline string) ([]promotion.StageStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pipeline == "api" {
		return []promotion.StageStatus{{Pipeline: "api", Stage: "live", Services: []string{scopeTheirs.String()}}}, nil
	}
	return []promotion.StageStatus{
		{Pipeline: "web", Stage: "dev", Services: []string{scopeMine.String()},
			Current: &promotion.Record{Pipeline: "web", Stage: "dev", Bundle: "aaaaaaaaaaaa", Status: promotion.Verified, Current: true}},
		{Pipeline: "web", Stage: "prod", From: "dev", Services: []string{scopeTheirs.String()}, Approvals: 2,
			Current: &promotion.Record{Pipeline: "web", Stage: "prod", Bundle: "cccccccccccc", Status: promotion.Verified, Current: true},
			Waiting: []promotion.Record{f.awaiting}},
	}, nil
}

func (f *fakePromotions) Bundles(context.Context, string) ([]promotion.BundleStatus, error) {
	digest := "sha256:" + strings.Repeat("0", 64)
	return []promotion.BundleStatus{
		{Bundle: promotion.Bundle{ID: "aaaaaaaaaaaa", Stage: "dev", Images: []promotion.Image{{Repository: "reg.example/a/web", Tag: "2", Digest: digest}}},
			Stages: []promotion.Record{{Stage: "dev", Bundle: "aaaaaaaaaaaa", Status: promotion.Verified}, {Stage: "prod", Bundle: "aaaaaaaaaaaa", Status: promotion.AwaitingApproval}}},
		// Formed in prod only: none of team a's business.
		{Bundle: promotion.Bundle{ID: "cccccccccccc", Stage: "prod", Images: []promotion.Image{{Repository: "reg.example/b/secret-api", Tag: "9", Digest: digest}}},
			Stages: []promotion.Record{{Stage: "prod", Bundle: "cccccccccccc", Status: promotion.Verified}}},
	}, nil
}

func (f *fakePromotions) PlanPromotion(_ context.Context, req promotion.PromoteRequest) (release.Spec, *release.Plan, error) {
	bundle := req.Bundle
	if bundle == "" {
		bundle = "aaaaaaaaaaaa"
	}
	spec := release.Spec{Services: []platform.ID{scopeMine}, User: req.User, Promotion: &release.Promotion{Pipeline: req.Pipeline, Stage: req.Stage, Bundle: bundle}}
	plan := &release.Plan{Checksum: f.checksum, Items: []release.Item{{Service: scopeMine, Action: release.Update,
		Updates: []release.ContainerUpdate{{Container: "app", Current: "reg.example/a/web:1", Target: "reg.example/a/web:2"}}}}}
	return spec, plan, nil
}

func (f *fakePromotions) Promote(_ context.Context, instance string, req promotion.PromoteRequest, checksum string) (jobs.JobUpdate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promoted = append(f.promoted, req)
	return jobs.JobUpdate{Job: history.Job{ID: "job-1", Instance: instance}}, nil
}

func (f *fakePromotions) Approve(_ context.Context, pipeline, stage, bundle, by string) (promotion.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.approvals = append(f.approvals, by)
	st := promotionPipelines()[0].Stages[1]
	r, err := promotion.Advance(f.awaiting, st, promotion.Event{Kind: promotion.EvApproved, By: by}, time.Now())
	if err != nil {
		return promotion.Record{}, err
	}
	f.awaiting = r
	return r, nil
}

func (f *fakePromotions) Resume(_ context.Context, pipeline, stage, by string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumed = append(f.resumed, stage+"/"+by)
	return nil
}

// withHelp is an error's message and its help text (ErrorInfo's).
func withHelp(err error) string {
	st := status.Convert(err)
	out := st.Message()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			out += "\n\n" + info.GetMetadata()["help"]
		}
	}
	return out
}

// promotionFixture is the scope suite's fixture with promotions, and
// named deployer tokens of team b's: alice's and bob's.
func promotionFixture(t *testing.T) (*fixture, *fakePromotions, map[string]string) {
	t.Helper()
	cluster, m := scopeWorld()
	fp := newFakePromotions()
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m, specs: make(chan release.Spec, 1)}, Jobs: stubJobs{}, Promotions: fp})
	named := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		tok, err := auth.Create(f.tokensFile, auth.Identity{Instance: "team-b", Role: auth.Deployer, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		named[name] = tok
	}
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	return f, fp, named
}

// Without a promotion loop every promotion call says fluxd runs no
// pipelines, and how to have some.
func TestPromotionCallsWithoutPipelines(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	ctx := withToken(f.tokens[auth.Admin])
	_, err := f.client.ListStages(ctx, &fluxdv1.ListStagesRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(withHelp(err), "runs no promotion pipelines") || !strings.Contains(withHelp(err), "--git-path") {
		t.Errorf("stages: %v", err)
	}
	_, err = f.client.Approve(ctx, &fluxdv1.ApproveRequest{Stage: "prod"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("approve: %v", err)
	}
}

// A scoped viewer sees only the stages whose services are all in its
// scope, and only the bundles with a record in one of them, each with
// only those records: never another team's stage, nor its bundle's
// images. The unscoped instance sees everything.
func TestStagesAndBundlesKeepToTheCallersScope(t *testing.T) {
	f, _, _ := promotionFixture(t)
	mine := withToken(f.tokens[auth.Viewer])

	// Team a sees one pipeline, so it need not name it.
	st, err := f.client.ListStages(mine, &fluxdv1.ListStagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range st.GetStages() {
		names = append(names, s.GetName())
	}
	if diff := cmp.Diff([]string{"dev"}, names); diff != "" {
		t.Errorf("team a's stages (-want +got):\n%s", diff)
	}
	bs, err := f.client.ListBundles(mine, &fluxdv1.ListBundlesRequest{Pipeline: "web"})
	if err != nil {
		t.Fatal(err)
	}
	text := prototext.Format(bs) + prototext.Format(st)
	for _, leak := range []string{"secret-api", "prod", "cccccccccccc", "b:deployment"} {
		if strings.Contains(text, leak) {
			t.Errorf("team a's answers mention %q:\n%s", leak, text)
		}
	}
	if len(bs.GetBundles()) != 1 || bs.GetBundles()[0].GetId() != "aaaaaaaaaaaa" || len(bs.GetBundles()[0].GetRecords()) != 1 {
		t.Errorf("team a's bundles: %s", prototext.Format(bs))
	}
	ps, err := f.client.ListPipelines(mine, &fluxdv1.ListPipelinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.GetPipelines()) != 1 || !cmp.Equal(ps.GetPipelines()[0].GetStages(), []string{"dev"}) {
		t.Errorf("team a's pipelines: %s", prototext.Format(ps))
	}
	// Another team's pipeline is, to team a, one that does not exist.
	_, errTheirs := f.client.ListStages(mine, &fluxdv1.ListStagesRequest{Pipeline: "api"})
	_, errNone := f.client.ListStages(mine, &fluxdv1.ListStagesRequest{Pipeline: "nope"})
	if status.Code(errTheirs) != codes.NotFound || strings.ReplaceAll(status.Convert(errTheirs).Message(), "api", "X") != strings.ReplaceAll(status.Convert(errNone).Message(), "nope", "X") {
		t.Errorf("another team's pipeline: %v; no pipeline: %v", errTheirs, errNone)
	}

	// Team b sees both pipelines, so it must name one: the error lists them.
	theirs := withToken(f.other[auth.Viewer])
	_, err = f.client.ListStages(theirs, &fluxdv1.ListStagesRequest{})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(withHelp(err), "web, api") || !strings.Contains(withHelp(err), "--pipeline") {
		t.Errorf("team b without a pipeline: %v", err)
	}
	st, err = f.client.ListStages(theirs, &fluxdv1.ListStagesRequest{Pipeline: "team/web"})
	if err != nil || len(st.GetStages()) != 2 || st.GetStages()[1].GetWaiting()[0].GetStatus() != "awaiting approval" {
		t.Errorf("team b's stages: %v %s", err, prototext.Format(st))
	}
	bs, err = f.client.ListBundles(theirs, &fluxdv1.ListBundlesRequest{Pipeline: "web"})
	if err != nil || len(bs.GetBundles()) != 2 || len(bs.GetBundles()[0].GetRecords()) != 2 {
		t.Errorf("team b's bundles: %v %s", err, prototext.Format(bs))
	}
}

// Promote (to make one: a plan is a viewer's, as a release's is),
// Approve and Resume need the deployer role, and a stage with
// every service in the caller's scope: team a's deployer is told that
// prod does not exist, exactly as for a stage that does not, and the
// loop is never asked.
func TestPromotionActionsNeedDeployerInTheStagesScope(t *testing.T) {
	f, fp, _ := promotionFixture(t)
	viewer, deployer := withToken(f.tokens[auth.Viewer]), withToken(f.tokens[auth.Deployer])
	calls := map[string]func(ctx context.Context, stage string) error{
		"promote": func(ctx context.Context, stage string) error {
			_, err := f.client.Promote(ctx, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: stage, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE})
			if status.Code(err) == codes.FailedPrecondition {
				return nil // past the role and scope: the checksum is missing
			}
			return err
		},
		"approve": func(ctx context.Context, stage string) error {
			_, err := f.client.Approve(ctx, &fluxdv1.ApproveRequest{Pipeline: "web", Stage: stage, Bundle: "bbbbbbbbbbbb"})
			return err
		},
		"resume": func(ctx context.Context, stage string) error {
			_, err := f.client.ResumeStage(ctx, &fluxdv1.ResumeStageRequest{Pipeline: "web", Stage: stage})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call(viewer, "dev")
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs the deployer role") || !strings.Contains(err.Error(), "fluxctl") {
				t.Errorf("a viewer: %v", err)
			}
			errTheirs, errNone := call(deployer, "prod"), call(deployer, "nope")
			if status.Code(errTheirs) != codes.NotFound || strings.ReplaceAll(status.Convert(errTheirs).Message(), "prod", "X") != strings.ReplaceAll(status.Convert(errNone).Message(), "nope", "X") {
				t.Errorf("another team's stage: %v; no such stage: %v", errTheirs, errNone)
			}
			if strings.Contains(errTheirs.Error(), "prod") && !strings.Contains(errTheirs.Error(), `"prod"`) {
				t.Errorf("the refusal lists the other team's stage: %v", errTheirs)
			}
			if err := call(deployer, "dev"); err != nil {
				t.Errorf("team a's deployer in its own stage: %v", err)
			}
		})
	}
	// A viewer may plan a promotion in its own stage, not in another's.
	if _, err := f.client.Promote(viewer, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "dev", Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}); err != nil {
		t.Errorf("a viewer's plan in its own stage: %v", err)
	}
	if _, err := f.client.Promote(viewer, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "prod", Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}); status.Code(err) != codes.NotFound {
		t.Errorf("a viewer's plan in another team's stage: %v", err)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, by := range fp.approvals {
		if by != "instance:team-a" {
			t.Errorf("approved as %q; only team a's dev approval should have reached the loop", by)
		}
	}
	if len(fp.approvals) != 1 || len(fp.resumed) != 1 || fp.resumed[0] != "dev/instance:team-a" {
		t.Errorf("the loop was asked approvals %v, resumes %v; want team a's one each, in dev", fp.approvals, fp.resumed)
	}
}

// The approver is the token's holder, whatever the request: the same
// person approving twice counts once, and two people count twice. With
// the bundle left out, the one awaiting approval in the stage is
// approved.
func TestApproveCountsTheTokensHolder(t *testing.T) {
	f, fp, named := promotionFixture(t)
	approve := func(tok string) *fluxdv1.ApproveResponse {
		t.Helper()
		resp, err := f.client.Approve(withToken(tok), &fluxdv1.ApproveRequest{Pipeline: "web", Stage: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	approve(named["alice"])
	resp := approve(named["alice"])
	if diff := cmp.Diff([]string{"alice"}, resp.GetRecord().GetApprovers()); diff != "" || resp.GetApprover() != "alice" || resp.GetApprovals() != 2 {
		t.Errorf("alice twice: approver %q, %d asked, approvers (-want +got):\n%s", resp.GetApprover(), resp.GetApprovals(), diff)
	}
	resp = approve(named["bob"])
	if diff := cmp.Diff([]string{"alice", "bob"}, resp.GetRecord().GetApprovers()); diff != "" {
		t.Errorf("alice and bob: approvers (-want +got):\n%s", diff)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if diff := cmp.Diff([]string{"alice", "alice", "bob"}, fp.approvals); diff != "" {
		t.Errorf("the loop was asked to approve as (-want +got):\n%s", diff)
	}
}

// A promotion runs as a release does: planned, then executed only while
// the plan still has the checksum the person confirmed, authored by the
// token's holder (and who they say they are, as "alice as ...").
func TestPromoteConfirmsTheChecksum(t *testing.T) {
	f, fp, named := promotionFixture(t)
	ctx := withToken(named["alice"])
	plan, err := f.client.Promote(ctx, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "prod", Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN})
	if err != nil {
		t.Fatal(err)
	}
	if plan.GetBundle() != "aaaaaaaaaaaa" || plan.GetPlan().GetChecksum() != "sum-1" || plan.GetJobId() != "" {
		t.Errorf("plan: %s", prototext.Format(plan))
	}
	_, err = f.client.Promote(ctx, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "prod", Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Checksum: "sum-0"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no longer matches") {
		t.Errorf("a stale checksum: %v", err)
	}
	resp, err := f.client.Promote(ctx, &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "prod", Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Checksum: "sum-1", User: "Alice A <alice@example.com>"})
	if err != nil || resp.GetJobId() != "job-1" {
		t.Fatalf("execute: %v %s", err, prototext.Format(resp))
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	want := []promotion.PromoteRequest{{Pipeline: "web", Stage: "prod", Bundle: "aaaaaaaaaaaa", User: "alice as Alice A <alice@example.com>"}}
	if diff := cmp.Diff(want, fp.promoted); diff != "" {
		t.Errorf("promotions queued (-want +got):\n%s", diff)
	}
}
