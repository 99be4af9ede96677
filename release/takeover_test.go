package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// A job taken over after fluxd restarted does not report success for a
// release that git no longer holds: reverted by a person, or force-pushed
// away. Its take-over fails, applies nothing, and history says why.
func TestTakeOverOfARevertedOrForcePushedReleaseFails(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		meanwhile  func(t *testing.T, g *realGit, seed string)
	}{
		{"reverted", "git no longer holds the release", func(t *testing.T, g *realGit, _ string) {
			g.personEdits(t, "revert web to 1.0", map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
		}},
		{"force-pushed away", "no longer has commit", func(t *testing.T, g *realGit, seed string) {
			gitCLI(t, g.bare, "update-ref", "refs/heads/main", seed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
			seed := gitCLI(t, g.bare, "rev-parse", "main")
			ctx := context.Background()
			spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}
			// The job pushed (and fluxd died before following it).
			res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
			if err != nil {
				t.Fatal(err)
			}
			tc.meanwhile(t, g, seed)
			g.cluster.applied = map[platform.ID]string{}
			g.cluster.workloads = []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "ready"}}
			_, err = g.e.Resume(ctx, "team", spec, res.Plan, res.Commit, history.Release,
				ExecOptions{JobID: "j1", RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("take-over: %v; want it to fail: %s", err, tc.want)
			}
			if len(g.cluster.applied) != 0 {
				t.Errorf("the take-over applied %v; want nothing", g.cluster.applied)
			}
			evs := g.events(t) // newest first
			if len(evs) != 2 || evs[0].Type != history.Failed || !strings.Contains(evs[0].Error, tc.want) {
				t.Errorf("history = %+v; want the release, then its failed take-over", evs)
			}
		})
	}
}

// syncHook runs before the nth Sync (fetch) from now.
type syncHook struct {
	Repo
	n, calls int
	before   func()
}

func (r *syncHook) Sync(ctx context.Context) (string, error) {
	if r.calls++; r.calls == r.n {
		r.before()
	}
	return r.Repo.Sync(ctx)
}

// A revert pushed while a take-over runs is never applied under the
// release's name: the check that git still holds the release and the
// apply read one fetch, so the take-over either applies the release or
// fails having applied nothing. (The revert lands before the take-over's
// second fetch, where it used to check on one and apply another.)
func TestTakeOverNeverAppliesARevertPushedDuringIt(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}
	res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	g.e.repo = &syncHook{Repo: g.e.repo, n: 2, before: func() {
		g.personEdits(t, "revert web to 1.0", map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	}}
	g.cluster.applied = map[platform.ID]string{}
	g.cluster.workloads = []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "ready"}}
	_, err = g.e.Resume(ctx, "team", spec, res.Plan, res.Commit, history.Release,
		ExecOptions{JobID: "j1", RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond})
	applied := g.cluster.applied[id("web")]
	if err == nil && !strings.Contains(applied, "reg/web:1.2") {
		t.Fatalf("the take-over succeeded, having applied %q; want the release's reg/web:1.2", applied)
	}
	if err != nil && applied != "" {
		t.Fatalf("the take-over failed (%v) having applied %q", err, applied)
	}
}
