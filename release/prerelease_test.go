package release

import (
	"context"
	"testing"
	"time"
)

// A service running a pre-release with no tag filter is planned onto its
// own release once it is pushed, whatever the build times say.
func TestPlanMovesAPreReleaseToItsRelease(t *testing.T) {
	g := newRealGit(t, map[string]string{"app.yaml": deployment("app", "reg/app:1.2.0-rc.1")})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.e.images = memImages{"reg/app": {
		// The release was re-tagged from an older build than rc.2.
		{Repository: "reg/app", Tag: "1.2.0-rc.2", CreatedAt: t0.Add(2 * time.Hour)},
		{Repository: "reg/app", Tag: "1.2.0", CreatedAt: t0.Add(time.Hour)},
		{Repository: "reg/app", Tag: "1.2.0-rc.1", CreatedAt: t0},
	}}
	p, err := g.e.Plan(context.Background(), Spec{All: true, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{"app", "update", "", "app:reg/app:1.2.0-rc.1->reg/app:1.2.0"}}
	if got := rows(p); len(got) != 1 || got[0] != want[0] {
		t.Errorf("plan = %+v; want %+v", got, want)
	}
}
