package release

import (
	"context"
	"testing"
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
