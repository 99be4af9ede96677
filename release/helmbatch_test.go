package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// An automated batch that moves a HelmRelease nothing reports on and a
// Deployment that rolls out ends "applied, not rolled out". Its history
// has a row per service: the HelmRelease's says it was not rolled out,
// the Deployment's does not. The per-service rows were rebuilt from the
// plan and all lost the note, so history claimed a rollout nobody saw
// (found by the torture suite, seed 119).
func TestAutomatedBatchRowsSayNotRolledOut(t *testing.T) {
	hr := strings.Replace(helmWeb, "  namespace: default\n", "  namespace: default\n  annotations:\n    fluxd.io/automated: \"true\"\n", 1)
	g := newRealGit(t, map[string]string{"web.yaml": hr, "api.yaml": deployment("api", "reg/api:2.0", "fluxd.io/automated", "true")})
	g.cluster.workloads = []platform.Workload{
		{ID: hrWeb, Generation: 1, ObservedGeneration: 0, Status: "updating"},
		{ID: id("api"), Generation: 1, ObservedGeneration: 1, Status: "ready"},
	}
	spec := Spec{Services: []platform.ID{hrWeb, id("api")}, AllLatest: true, User: "automator", Automated: true}
	res, err := g.e.Execute(context.Background(), "team", spec, history.AutomatedRelease, ExecOptions{RolloutTimeout: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.NotRolledOut, "not rolled out") {
		t.Fatalf("NotRolledOut = %q, want the HelmRelease named", res.NotRolledOut)
	}
	got := map[string]bool{}
	for _, ev := range g.events(t) {
		got[strings.Join(ev.Services, ",")] = strings.Contains(ev.Message, "not rolled out")
	}
	want := map[string]bool{hrWeb.String(): true, id("api").String(): false}
	if len(got) != len(want) || got[hrWeb.String()] != true || got[id("api").String()] != false {
		t.Errorf("rows saying 'not rolled out', by service: %v; want %v", got, want)
	}
}
