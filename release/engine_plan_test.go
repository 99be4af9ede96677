package release

import (
	"context"
	"testing"
	"time"
)

// countingRepo counts the fetches (Syncs) of the remote.
type countingRepo struct {
	*recRepo
	syncs int
}

func (r *countingRepo) Sync(ctx context.Context) (string, error) {
	r.syncs++
	return r.recRepo.Sync(ctx)
}

// A cached plan (the status page's overview) reads the clone as it is:
// no fetch once one was made; an ordinary plan fetches each time.
func TestCachedPlanDoesNotFetch(t *testing.T) {
	e, repo, _, _ := newTestEngine(t)
	counting := &countingRepo{recRepo: repo}
	e.repo = counting
	ctx := context.Background()
	if _, err := e.Plan(ctx, Spec{All: true, AllLatest: true, Cached: true}); err != nil {
		t.Fatal(err)
	}
	if counting.syncs != 1 {
		t.Errorf("a cached plan before any fetch made %d fetches; want 1 (there is no clone to read yet)", counting.syncs)
	}
	for i := 0; i < 5; i++ {
		p, err := e.Plan(ctx, Spec{All: true, AllLatest: true, Cached: true})
		if err != nil || len(p.Items) == 0 {
			t.Fatalf("cached plan: %v, %v", p, err)
		}
	}
	if counting.syncs != 1 {
		t.Errorf("5 cached plans made %d fetches in all; want none after the first", counting.syncs-1)
	}
	if _, err := e.Plan(ctx, Spec{All: true, AllLatest: true}); err != nil {
		t.Fatal(err)
	}
	if counting.syncs != 2 {
		t.Errorf("an ordinary plan did not fetch (%d fetches)", counting.syncs)
	}
}

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
