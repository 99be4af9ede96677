package release

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// refusingCluster refuses to apply one workload's manifest while it names
// one image (an admission policy that denies it), applies the rest, and
// reports every applied workload rolled out.
type refusingCluster struct {
	mu      sync.Mutex
	refuse  platform.ID
	image   string
	applied map[platform.ID][]string
}

func (c *refusingCluster) Apply(_ context.Context, id platform.ID, m []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == c.refuse && strings.Contains(string(m), c.image) {
		return 0, errors.New(`admission webhook "images.example.com" denied the request`)
	}
	c.applied[id] = append(c.applied[id], string(m))
	return int64(len(c.applied[id])), nil
}

func (c *refusingCluster) Workloads(context.Context) ([]platform.Workload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []platform.Workload
	for id, ms := range c.applied {
		g := int64(len(ms))
		out = append(out, platform.Workload{ID: id, Generation: g, ObservedGeneration: g, Status: "ready"})
	}
	return out, nil
}

func (c *refusingCluster) Diagnose(context.Context, platform.ID) string { return "" }

// When one of a release's workloads fails to apply, the others are still
// applied and followed, and --rollback-on-failure rolls the whole release
// back: a revert commit in the remote, the revert applied.
func TestOneWorkloadFailingToApplyRollsTheReleaseBack(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0"), "api.yaml": deployment("api", "reg/web:1.0")})
	cluster := &refusingCluster{refuse: id("api"), image: "reg/web:1.2", applied: map[platform.ID][]string{}}
	g.e.cluster = cluster
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := g.e.Execute(ctx, "team", Spec{Services: []platform.ID{id("web"), id("api")}, Image: "reg/web:1.2", User: "dana"}, history.Release,
		ExecOptions{RolloutTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, RollbackOnFailure: true, JobID: "j1"})
	if err == nil || !strings.Contains(err.Error(), "applying default:deployment/api") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("err = %v; want the failed apply, rolled back", err)
	}
	if msg := gitCLI(t, g.bare, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(msg, "Revert release") {
		t.Errorf("the remote's last commit is %q; want the revert", msg)
	}
	for _, f := range []string{"web.yaml", "api.yaml"} {
		if got := g.remoteFile(t, f); !strings.Contains(got, "reg/web:1.0") {
			t.Errorf("the remote's %s after the rollback:\n%s", f, got)
		}
	}
	web := cluster.applied[id("web")]
	if len(web) != 2 || !strings.Contains(web[0], "reg/web:1.2") || !strings.Contains(web[1], "reg/web:1.0") {
		t.Errorf("web was applied %d times; want the release, then its rollback", len(web))
	}
	var types []string
	for _, ev := range g.events(t) {
		types = append(types, string(ev.Type))
	}
	if got := strings.Join(types, " "); got != "failed rollback" && got != "rollback failed" {
		t.Errorf("history = %q; want the rollback and the failed release", got)
	}
}

// The same holds for a job taken over after a restart: it applies every
// workload it can, follows them, and rolls back when asked.
func TestOneWorkloadFailingToApplyOnTakeOverRollsBack(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0"), "api.yaml": deployment("api", "reg/web:1.0")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Services: []platform.ID{id("web"), id("api")}, Image: "reg/web:1.2", User: "dana"}
	res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &refusingCluster{refuse: id("api"), image: "reg/web:1.2", applied: map[platform.ID][]string{}}
	g.e.cluster = cluster
	_, err = g.e.Resume(ctx, "team", spec, res.Plan, res.Commit, history.Release,
		ExecOptions{JobID: "j1", RolloutTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, RollbackOnFailure: true})
	if err == nil || !strings.Contains(err.Error(), "applying default:deployment/api") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("take-over: %v; want the failed apply, rolled back", err)
	}
	if got := g.remoteFile(t, "web.yaml"); !strings.Contains(got, "reg/web:1.0") {
		t.Errorf("the remote's web.yaml after the rollback:\n%s", got)
	}
	if web := cluster.applied[id("web")]; len(web) != 2 {
		t.Errorf("web was applied %d times; want the release, then its rollback", len(web))
	}
}
