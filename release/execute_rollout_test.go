package release

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
)

const helmWeb = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: default
spec:
  chart: {spec: {chart: web}}
  values:
    image:
      repository: reg/web # the web tier
      tag: "1.0"
`

var hrWeb = platform.ID{Namespace: "default", Kind: platform.KindHelmRelease, Name: "web"}

// A HelmRelease is released like a Deployment: its values change in git
// (tag only, comment kept), and the job follows its Ready condition.
// Where nothing ever reports on it, the job ends "applied, not rolled
// out", recorded so, and is not rolled back.
func TestHelmReleaseRollout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload platform.Workload
		want     string // "" rolled out, else the NotRolledOut or failure text
		failed   bool
	}{
		{name: "helm-controller reports Ready at the new generation",
			workload: platform.Workload{ID: hrWeb, Generation: 1, ObservedGeneration: 1, Status: "ready"}},
		{name: "nothing reports: committed and applied, not rolled out",
			workload: platform.Workload{ID: hrWeb, Generation: 1, ObservedGeneration: 0, Status: "updating"},
			want:     "committed and applied, not rolled out: nothing reported on the rollout of default:helmrelease/web"},
		{name: "helm-controller reports the upgrade failed",
			workload: platform.Workload{ID: hrWeb, Generation: 1, ObservedGeneration: 1, Status: "updating", Stuck: "its Ready condition is False: UpgradeFailed: boom"},
			want:     "UpgradeFailed: boom", failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, map[string]string{"web.yaml": helmWeb})
			g.cluster.workloads = []platform.Workload{tc.workload}
			spec := Spec{Services: []platform.ID{hrWeb}, Image: "reg/web:1.2", User: "dana"}
			res, err := g.e.Execute(context.Background(), "team", spec, history.Release, ExecOptions{RolloutTimeout: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond})
			if got := g.remoteFile(t, "web.yaml"); !strings.Contains(got, "repository: reg/web # the web tier\n      tag: \"1.2\"") {
				t.Fatalf("git holds, after the release:\n%s", got)
			}
			if _, ok := g.cluster.applied[hrWeb]; !ok {
				t.Fatal("the HelmRelease was not applied")
			}
			evs := g.events(t)
			if tc.failed {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Execute: %v, want a failure saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.NotRolledOut == "" != (tc.want == "") || !strings.Contains(res.NotRolledOut, tc.want) {
				t.Fatalf("NotRolledOut = %q, want %q", res.NotRolledOut, tc.want)
			}
			if len(evs) != 1 || evs[0].Type != history.Release || !strings.Contains(evs[0].Message, tc.want) {
				t.Fatalf("history holds %+v, want one release whose message says %q", evs, tc.want)
			}
		})
	}
}

// A HelmRelease whose spec.targetNamespace (or storageNamespace) is
// another namespace installs there: a scoped instance may release it only
// when its scope holds that namespace too, as it holds the HelmRelease's.
func TestHelmReleaseTargetNamespaceKeepsToTheScope(t *testing.T) {
	into := strings.Replace(helmWeb, "  chart: {spec: {chart: web}}", "  targetNamespace: team-b\n  chart: {spec: {chart: web}}", 1)
	g := newRealGit(t, map[string]string{"web.yaml": into})
	for _, tc := range []struct {
		scope auth.Scope
		items int
	}{
		{auth.Scope{Namespaces: []string{"default"}}, 0},
		{auth.Scope{Namespaces: []string{"default", "team-b"}}, 1},
	} {
		scope := tc.scope
		p, err := g.e.Plan(context.Background(), Spec{Services: []platform.ID{hrWeb}, Image: "reg/web:1.2", Scope: &scope})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != tc.items {
			t.Errorf("scope %s: plan %+v, want %d items", scope.String(), rows(p), tc.items)
		}
	}
}

// helmControllers is a cluster that says whether a Helm controller runs.
type helmControllers struct {
	*recCluster
	why   string
	err   error
	asked *int
}

func (c helmControllers) HelmControllerAbsent(context.Context) (string, error) {
	if c.asked != nil {
		*c.asked++
	}
	return c.why, c.err
}

// Where no Helm controller runs, a HelmRelease's release ends "applied,
// not rolled out" once the grace has passed, saying why and what to
// check, not after the whole rollout timeout; where one may run (the
// cluster cannot tell, or one acts), it waits as before.
func TestHelmReleaseWithNoControllerEndsAtOnce(t *testing.T) {
	forbiddenAsked := 0
	t.Cleanup(func() {
		if forbiddenAsked != 1 {
			t.Errorf("a cluster that cannot tell was asked %d times in one rollout, want once", forbiddenAsked)
		}
	})
	for _, tc := range []struct {
		name    string
		cluster func(*recCluster) Cluster
		early   bool
		want    string
	}{
		{name: "no controller: ends after the grace, naming what to check",
			cluster: func(c *recCluster) Cluster {
				return helmControllers{c, "no Helm controller runs in the cluster", nil, nil}
			},
			early: true, want: "nothing acted on default:helmrelease/web within 100ms and no Helm controller runs in the cluster"},
		{name: "cannot tell: ends after the quiet time, saying it cannot tell",
			cluster: func(c *recCluster) Cluster {
				return helmControllers{c, "", errors.New("pods is forbidden"), &forbiddenAsked}
			},
			early: true, want: "within 600ms and fluxd could not tell whether a Helm controller runs (pods is forbidden)"},
		{name: "a controller runs: waits out the timeout",
			cluster: func(c *recCluster) Cluster { return helmControllers{c, "", nil, nil} },
			want:    "nothing reported on the rollout of default:helmrelease/web within 3s"},
		{name: "a cluster that cannot say: waits out the timeout",
			cluster: func(c *recCluster) Cluster { return c },
			want:    "nothing reported on the rollout of default:helmrelease/web within 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, map[string]string{"web.yaml": helmWeb})
			g.cluster.workloads = []platform.Workload{{ID: hrWeb, Generation: 1, ObservedGeneration: 0, Status: "updating"}}
			g.e.cluster = tc.cluster(g.cluster)
			spec := Spec{Services: []platform.ID{hrWeb}, Image: "reg/web:1.2", User: "dana"}
			start := time.Now()
			res, err := g.e.Execute(context.Background(), "team", spec, history.Release,
				ExecOptions{RolloutTimeout: 3 * time.Second, HelmGrace: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.NotRolledOut, tc.want) {
				t.Fatalf("NotRolledOut = %q, want it to say %q", res.NotRolledOut, tc.want)
			}
			if tc.early != (took < 3*time.Second) {
				t.Errorf("the release ended after %v; want it to end before the rollout timeout of 3s: %v", took, tc.early)
			}
			if evs := g.events(t); len(evs) != 1 || !strings.Contains(evs[0].Message, tc.want) {
				t.Fatalf("history holds %+v, want one release saying %q", evs, tc.want)
			}
		})
	}
}

// A HelmRelease a kustomization builds from a file of its own directory
// (Flux v2's usual layout: kustomization.yaml listing release.yaml) is a
// service: a release edits the values in that file, leaves the
// kustomization as it is, and applies the HelmRelease as the
// kustomization builds it; a lock is written on it there too. Where the
// kustomization renames it (namespace:), fluxd cannot tell which object
// to edit, and it is not offered, as before.
func TestHelmReleaseBuiltByAKustomization(t *testing.T) {
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - release.yaml\nlabels:\n  - pairs: {team: web}\n"
	g := newRealGit(t, map[string]string{"apps/kustomization.yaml": kustomization, "apps/release.yaml": helmWeb})
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{hrWeb}, Image: "reg/web:1.2", User: "dana"}
	g.cluster.workloads = []platform.Workload{{ID: hrWeb, Generation: 1, ObservedGeneration: 1, Status: "ready"}}
	if _, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{RolloutTimeout: 2 * time.Second, PollInterval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := g.remoteFile(t, "apps/release.yaml"); got != strings.TrimSpace(strings.Replace(helmWeb, `tag: "1.0"`, `tag: "1.2"`, 1)) {
		t.Errorf("apps/release.yaml after the release:\n%s", got)
	}
	if got := g.remoteFile(t, "apps/kustomization.yaml"); got != strings.TrimSpace(kustomization) {
		t.Errorf("the kustomization changed:\n%s", got)
	}
	if applied := g.cluster.applied[hrWeb]; !strings.Contains(applied, "team: web") || !strings.Contains(applied, "1.2") {
		t.Errorf("applied, not as the kustomization builds it:\n%s", applied)
	}
	if _, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: hrWeb, Set: map[string]string{AnnotationLocked: "true"}, Type: history.Lock, User: "dana"}); err != nil {
		t.Fatal(err)
	}
	if got := g.remoteFile(t, "apps/release.yaml"); !strings.Contains(got, "locked") {
		t.Errorf("apps/release.yaml after a lock:\n%s", got)
	}

	renamed := strings.Replace(kustomization, "resources:", "namespace: prod\nresources:", 1)
	g2 := newRealGit(t, map[string]string{"apps/kustomization.yaml": renamed, "apps/release.yaml": helmWeb})
	prod := platform.ID{Namespace: "prod", Kind: platform.KindHelmRelease, Name: "web"}
	if p, err := g2.e.Plan(ctx, Spec{Services: []platform.ID{prod}, Image: "reg/web:1.2"}); err == nil && len(p.Items) > 0 && p.Items[0].Action == Update {
		t.Errorf("a HelmRelease the kustomization renames was planned: %+v", rows(p))
	}
}

// A job taken over while it rolled out keeps its rollout's deadline: the
// timeout runs from when the rollout began (ExecOptions.RolloutStarted,
// which the queue reads from the job's log: release/jobs'
// TestRecoverPassesTheRolloutStart), not again from the take-over.
func TestTakenOverRolloutKeepsItsDeadline(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.0")})
	ctx := context.Background()
	spec := Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana", RolloutTimeout: 30 * time.Minute}
	res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	// It has rolled out for 40 minutes when its fluxd died; it never
	// finishes.
	g.cluster.workloads = []platform.Workload{{ID: id("web"), Generation: 1, ObservedGeneration: 1, Status: "updating"}}
	began := time.Now().Add(-40 * time.Minute)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	o := ExecOptions{RolloutTimeout: spec.RolloutTimeout, JobID: "j1", Started: began.Add(-time.Minute), RolloutStarted: began}
	_, err = g.e.Resume(rctx, "team", spec, res.Plan, res.Commit, history.Release, o)
	if rctx.Err() != nil {
		t.Fatal("the taken-over job is still following a rollout whose 30-minute timeout ran out 10 minutes ago")
	}
	if err == nil || !strings.Contains(err.Error(), "rollout timeout of 30m0s") {
		t.Fatalf("the taken-over release ended with %v; want it failed at its rollout timeout", err)
	}
}
