package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/promotion"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
)

// upToDatePromotions plans every promotion as nothing to write: the
// stage's services already run the bundle's images.
type upToDatePromotions struct{ *fakePromotions }

func (u upToDatePromotions) PlanPromotion(ctx context.Context, req promotion.PromoteRequest) (release.Spec, *release.Plan, error) {
	spec, plan, err := u.fakePromotions.PlanPromotion(ctx, req)
	if err != nil {
		return spec, plan, err
	}
	plan.Items[0].Action, plan.Items[0].Updates, plan.Items[0].Reason = release.UpToDate, nil, "already runs it"
	return spec, plan, nil
}

// review4: a bundle that failed a stage's checks and still runs there
// (no rollbackOnFailure) can never be tried again: 'fluxctl promote
// --force --to STAGE BUNDLE' plans nothing to write, and Daemon.Promote
// returns before it reaches the loop's Promote, which would record the
// bundle rolled out at once and run the stage's checks again. The
// command answers with an empty plan and no job, and the stage stays
// failed until another bundle comes.
func TestPromoteOfABundleAlreadyRunningReachesTheLoop(t *testing.T) {
	cluster, m := scopeWorld()
	fp := newFakePromotions()
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m, specs: make(chan release.Spec, 1)}, Jobs: stubJobs{}, Promotions: upToDatePromotions{fp}})
	tok, err := auth.Create(f.tokensFile, auth.Identity{Instance: "team-b", Role: auth.Deployer, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fh.WriteString("scope team-a namespaces=a\n")
	fh.Close()
	_, err = f.client.Promote(withToken(tok), &fluxdv1.PromoteRequest{Pipeline: "web", Stage: "prod", Bundle: "aaaaaaaaaaaa", Force: true,
		Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Checksum: "sum-1"})
	if err != nil {
		t.Fatal(err)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if len(fp.promoted) == 0 {
		t.Error("a promotion with nothing to write never reached the promotion loop: the stage's record (failed, or not this bundle) is left as it was")
	}
}
