package daemon

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
)

// verifiedReleaser plans one update whose image failed verification.
type verifiedReleaser struct{ specReleaser }

func (r *verifiedReleaser) Plan(ctx context.Context, s release.Spec) (*release.Plan, error) {
	_, _ = r.specReleaser.Plan(ctx, s)
	return &release.Plan{Items: []release.Item{{Service: platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}, Action: release.Update,
		Warnings: []string{"web: skipped newer images"},
		Updates: []release.ContainerUpdate{{Container: "web", Current: "reg.example/web:1", Target: "reg.example/web:2",
			Verification: release.Verification{Outcome: release.VerifyUnsigned, Profiles: []string{"signed"}, Digest: "sha256:aa", Detail: "profile signed: unsigned"}}}}}}, nil
}

// --allow-unverified is an admin's: a deployer (or a viewer's plan) is
// refused, saying what to do, before anything is planned; an admin's
// reaches the plan. The plan carries each update's verification and the
// item's warnings.
func TestAllowUnverifiedIsAdminOnly(t *testing.T) {
	rel := &verifiedReleaser{}
	f := newFixtureWith(t, Config{}, Deps{Cluster: &stubCluster{workloads: []platform.Workload{{ID: platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}}}}, Releaser: rel, Jobs: stubJobs{}})
	req := func(kind fluxdv1.ReleaseKind) *fluxdv1.ReleaseRequest {
		return &fluxdv1.ReleaseRequest{Kind: kind, Spec: &fluxdv1.ReleaseSpec{Services: []string{"default:deployment/web"}, Image: "reg.example/web:2", AllowUnverified: true}}
	}
	for _, tc := range []struct {
		role auth.Role
		kind fluxdv1.ReleaseKind
	}{
		{auth.Deployer, fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE},
		{auth.Deployer, fluxdv1.ReleaseKind_RELEASE_KIND_PLAN},
		{auth.Viewer, fluxdv1.ReleaseKind_RELEASE_KIND_PLAN},
	} {
		_, err := f.client.Release(withToken(f.tokens[tc.role]), req(tc.kind))
		help := ""
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				help = info.GetMetadata()["help"]
			}
		}
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--allow-unverified needs the admin role; your token's role is "+tc.role.String()) ||
			!strings.Contains(help, "cosign sign") {
			t.Errorf("%s %s: %v; want it refused, saying why and what to do", tc.role, tc.kind, err)
		}
	}
	if len(rel.specs) != 0 {
		t.Fatalf("a refused --allow-unverified was planned: %+v", rel.specs)
	}
	resp, err := f.client.Release(withToken(f.tokens[auth.Admin]), req(fluxdv1.ReleaseKind_RELEASE_KIND_PLAN))
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.specs) != 1 || !rel.specs[0].AllowUnverified {
		t.Errorf("an admin's plan: specs %+v; want AllowUnverified passed on", rel.specs)
	}
	it := resp.GetPlan().GetItems()[0]
	v := it.GetUpdates()[0].GetVerification()
	if v.GetOutcome() != "unsigned" || v.GetDigest() != "sha256:aa" || v.GetDetail() != "profile signed: unsigned" || len(v.GetProfiles()) != 1 {
		t.Errorf("verification %+v; want the plan's", v)
	}
	if len(it.GetWarnings()) != 1 {
		t.Errorf("warnings %v; want the item's", it.GetWarnings())
	}
}
