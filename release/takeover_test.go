package release

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
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

// targetCase is one format of workload a job applies, in a repository
// over reg/web at 1.0, released to 1.2.
type targetCase struct {
	name  string
	files map[string]string
	svc   platform.ID
	want  []Target
	// newMark and oldMark are in the applied document at 1.2 and 1.0.
	newMark, oldMark string
}

var webPolicy = platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "web"}

// policyInKustomization is Flux v2's usual layout: the image automation
// objects in a kustomization's directory, the marker on its images:
// newTag.
func policyInKustomization() map[string]string {
	return map[string]string{
		"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml, image-automation.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\" # {\"$imagepolicy\": \"flux-system:web:tag\"}\n",
		"apps/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
		"apps/image-automation.yaml": "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata: {name: web, namespace: flux-system}\nspec: {image: reg/web}\n---\n" +
			"apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata: {name: web, namespace: flux-system}\nspec:\n  imageRepositoryRef: {name: web}\n  policy: {semver: {range: \">=1.0\"}}\n---\n" +
			"apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {name: auto, namespace: flux-system}\nspec:\n  update: {path: ./}\n",
	}
}

func targetCases() []targetCase {
	return []targetCase{
		{name: "plain", files: map[string]string{"web.yaml": deployment("web", "reg/web:1.0")}, svc: id("web"),
			want: []Target{{id("web"), "web.yaml", TargetPlain}}, newMark: "image: reg/web:1.2", oldMark: "image: reg/web:1.0"},
		{name: "kustomize images entry", files: map[string]string{
			"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\"\n",
			"apps/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
		}, svc: id("web"), want: []Target{{id("web"), "apps/kustomization.yaml", TargetKustomize}}, newMark: "image: reg/web:1.2", oldMark: "image: reg/web:1.0"},
		{name: "marked field", files: fluxV2Files(), svc: webPolicy,
			want: []Target{{id("web"), "web.yaml", TargetMarked}}, newMark: "image: reg/web:1.2", oldMark: "image: reg/web:1.0"},
		{name: "marked newTag in a kustomization", files: policyInKustomization(), svc: webPolicy,
			want: []Target{{id("web"), "apps/kustomization.yaml", TargetMarked}}, newMark: "image: reg/web:1.2", oldMark: "image: reg/web:1.0"},
		{name: "HelmRelease values", files: map[string]string{"web.yaml": helmWeb}, svc: hrWeb,
			want: []Target{{hrWeb, "web.yaml", TargetHelmValues}}, newMark: `tag: "1.2"`, oldMark: `tag: "1.0"`},
	}
}

// savedPlan is plan as the job queue saves it and a fluxd taking the job
// over reads it back: through its JSON.
func savedPlan(t *testing.T, plan *Plan) *Plan {
	t.Helper()
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var out Plan
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// targetsReady makes the cluster report each target rolled out at
// generation 1 (what recCluster's Apply returns).
func targetsReady(g *realGit, want []Target) {
	g.cluster.applied = map[platform.ID]string{}
	g.cluster.workloads = nil
	for _, t := range want {
		g.cluster.workloads = append(g.cluster.workloads, platform.Workload{ID: t.Workload, Generation: 1, ObservedGeneration: 1, Status: "ready"})
	}
}

// checkApplied fails unless the cluster was applied exactly the targets,
// each with mark, and the rollout reports followed each.
func checkApplied(t *testing.T, g *realGit, want []Target, mark string, followed map[platform.ID]bool) {
	t.Helper()
	if len(g.cluster.applied) != len(want) {
		t.Errorf("applied %d workloads (%v); want exactly %v", len(g.cluster.applied), keys(g.cluster.applied), want)
	}
	for _, w := range want {
		doc, ok := g.cluster.applied[w.Workload]
		if !ok || !strings.Contains(doc, mark) {
			t.Errorf("%s applied: %v, with %q; want it applied with %q", w.Workload, ok, doc, mark)
		}
		if !followed[w.Workload] {
			t.Errorf("the rollout of %s was not followed to its end", w.Workload)
		}
	}
}

func keys(m map[platform.ID]string) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}

// followedBy records which workloads a job's progress reports rolled out.
func followedBy(followed map[platform.ID]bool) func(Progress) {
	return func(p Progress) {
		for _, w := range p.Workloads {
			if w.Done {
				followed[w.Service] = true
			}
		}
	}
}

// A job records, when it is planned, the workloads it applies, in every
// format, and its plan as saved carries them. A fluxd taking the job over
// after the push applies exactly those and follows their rollouts,
// whatever git holds by then: in Flux v2's usual layout (a marker on a
// kustomization's newTag) it used to look for the workloads running the
// plan's old image, find none, apply nothing, and succeed.
func TestTakeOverAppliesTheRecordedTargetsInEveryFormat(t *testing.T) {
	for _, tc := range targetCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, tc.files)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			spec := Spec{Services: []platform.ID{tc.svc}, Image: "reg/web:1.2", User: "dana"}
			// The first fluxd stops while the release rolls out: it
			// pushed and applied, and recorded nothing.
			root, stop := context.WithCancel(ctx)
			var saved *Plan
			var commit string
			_, err := g.e.Execute(WithRoot(root, root), "team", spec, history.Release, ExecOptions{JobID: "j1", RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond, Report: func(p Progress) {
				if p.Plan != nil {
					saved = savedPlan(t, p.Plan) // as the queue saves it, before the push
				}
				if p.Stage == StageRollingOut {
					commit = p.Commit
					stop()
				}
			}})
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("the first fluxd's job: %v; want it interrupted", err)
			}
			res := &Result{Commit: commit}
			if saved == nil || !saved.Targeted || len(saved.Items) != 1 || !reflect.DeepEqual(saved.Items[0].Targets, tc.want) {
				t.Fatalf("the plan saved before the push: %+v; want it to record the targets %v", saved, tc.want)
			}
			targetsReady(g, tc.want)
			followed := map[platform.ID]bool{}
			_, err = g.e.Resume(ctx, "team", spec, saved, res.Commit, history.Release,
				ExecOptions{JobID: "j1", RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond, Report: followedBy(followed)})
			if err != nil {
				t.Fatalf("take-over: %v", err)
			}
			checkApplied(t, g, tc.want, tc.newMark, followed)
			if evs := g.events(t); len(evs) != 1 || evs[0].Type != history.Release || evs[0].Commit != res.Commit || res.Commit == "" {
				t.Errorf("history = %+v; want the one release, recorded by the take-over", evs)
			}
		})
	}
}

// A job taken over while it rolled its release back, whose revert the
// stopped fluxd had pushed already, applies the release's recorded
// workloads at their image from before, and follows them, in every
// format. (It used to look the workloads up by the release's image,
// which git no longer held: it applied nothing and said the rollback
// rolled out.)
func TestTakenOverRollbackAppliesTheRecordedTargetsInEveryFormat(t *testing.T) {
	for _, tc := range targetCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, tc.files)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			spec := Spec{Services: []platform.ID{tc.svc}, Image: "reg/web:1.2", User: "dana"}
			res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
			if err != nil {
				t.Fatal(err)
			}
			// The stopped fluxd's revert: the files as they were.
			g.personEdits(t, "Revert release", tc.files)
			targetsReady(g, tc.want)
			followed := map[platform.ID]bool{}
			_, err = g.e.Resume(ctx, "team", spec, savedPlan(t, res.Plan), res.Commit, history.Release,
				ExecOptions{JobID: "j1", RollingBack: true, RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond, Report: followedBy(followed)})
			if err == nil || !strings.Contains(err.Error(), "git already had the revert), and the rollback rolled out") {
				t.Fatalf("take-over of the rollback: %v; want it failed, rolled back", err)
			}
			checkApplied(t, g, tc.want, tc.oldMark, followed)
		})
	}
}

// A user's cancel while the release rolls out reverts it and applies the
// recorded workloads at their image from before, in every format.
func TestCancelledReleaseRevertsTheRecordedTargetsInEveryFormat(t *testing.T) {
	for _, tc := range targetCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := newRealGit(t, tc.files)
			// The release's rollout never ends; the revert's does.
			cluster := &readyOnSecondApply{recCluster: g.cluster, applies: map[platform.ID]int{}}
			for _, w := range tc.want {
				cluster.ids = append(cluster.ids, w.Workload)
			}
			g.e.cluster = cluster
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			spec := Spec{Services: []platform.ID{tc.svc}, Image: "reg/web:1.2", User: "dana"}
			released := map[platform.ID]string{}
			report := func(p Progress) {
				if p.Stage == StageRollingOut && len(released) == 0 {
					for k, v := range g.cluster.applied {
						released[k] = v
					}
					cancel(ErrCancelled)
				}
			}
			_, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1", RolloutTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, Report: report})
			if err == nil || !strings.Contains(err.Error(), "rolled back in commit") {
				t.Fatalf("cancelled release: %v; want it rolled back", err)
			}
			if doc := released[tc.want[0].Workload]; !strings.Contains(doc, tc.newMark) {
				t.Errorf("the release applied %q; want %q", doc, tc.newMark)
			}
			followed := map[platform.ID]bool{}
			for _, w := range tc.want {
				followed[w.Workload] = cluster.applies[w.Workload] == 2
			}
			checkApplied(t, g, tc.want, tc.oldMark, followed)
		})
	}
}

// readyOnSecondApply reports its workloads rolled out once they were
// applied twice (a release, then its revert).
type readyOnSecondApply struct {
	*recCluster
	ids     []platform.ID
	applies map[platform.ID]int
}

func (c *readyOnSecondApply) Apply(ctx context.Context, id platform.ID, m []byte) (int64, error) {
	c.applies[id]++
	return c.recCluster.Apply(ctx, id, m)
}

func (c *readyOnSecondApply) Workloads(context.Context) ([]platform.Workload, error) {
	var out []platform.Workload
	for _, id := range c.ids {
		w := platform.Workload{ID: id, Generation: 1, Status: "updating"}
		if c.applies[id] >= 2 {
			w.ObservedGeneration, w.Status = 1, "ready"
		}
		out = append(out, w)
	}
	return out, nil
}

// A job saved by a fluxd that did not record its targets (no Targets, no
// Targeted in its JSON) is still taken over: its workloads are looked up
// in git, by the plan's images, the release's included, and the log says
// so.
func TestTakeOverOfAJobSavedWithoutTargets(t *testing.T) {
	g := newRealGit(t, policyInKustomization())
	var logs strings.Builder
	g.e.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Services: []platform.ID{webPolicy}, Image: "reg/web:1.2", User: "dana"}
	res, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	// The JSON an older fluxd saved: the same plan, without the fields.
	old := `{"Revision":"` + res.Plan.Revision + `","Items":[{"Service":{"Namespace":"flux-system","Kind":"imagepolicy","Name":"web"},"Action":"update","Reason":"","Updates":[{"Container":"` +
		res.Plan.Items[0].Updates[0].Container + `","Current":"reg/web:1.0","Target":"reg/web:1.2"}],"File":"` + res.Plan.Items[0].File + `"}],"Checksum":"` + res.Plan.Checksum + `"}`
	var plan Plan
	if err := json.Unmarshal([]byte(old), &plan); err != nil {
		t.Fatal(err)
	}
	want := []Target{{Workload: id("web")}}
	targetsReady(g, want)
	followed := map[platform.ID]bool{}
	if _, err := g.e.Resume(ctx, "team", spec, &plan, res.Commit, history.Release,
		ExecOptions{JobID: "j1", RolloutTimeout: 5 * time.Second, PollInterval: 5 * time.Millisecond, Report: followedBy(followed)}); err != nil {
		t.Fatalf("take-over: %v", err)
	}
	checkApplied(t, g, want, "image: reg/web:1.2", followed)
	if !strings.Contains(logs.String(), "saved by an older fluxd") {
		t.Errorf("the log does not say the job was saved without its targets:\n%s", logs.String())
	}
}

// The rule of a job's end: it never succeeds having applied nothing,
// unless there was nothing to apply, and then it says so.
func TestJobNeverSucceedsHavingAppliedNothing(t *testing.T) {
	web := Target{Workload: id("web"), File: "web.yaml", Format: TargetPlain}
	upd := []ContainerUpdate{{Container: "web", Current: "reg/web:1.0", Target: "reg/web:1.2"}}
	applied := map[platform.ID]int64{id("web"): 2}
	for _, tc := range []struct {
		name     string
		plan     *Plan
		gens     map[platform.ID]int64
		note     string
		errWants string
	}{
		{"empty plan", &Plan{Targeted: true, Items: []Item{{Service: id("web"), Action: UpToDate}}}, nil, NothingToApply, ""},
		{"applied what it recorded", &Plan{Targeted: true, Items: []Item{{Service: id("web"), Action: Update, Updates: upd, Targets: []Target{web}}}}, applied, "", ""},
		{"applied less than it recorded", &Plan{Targeted: true, Items: []Item{{Service: id("web"), Action: Update, Updates: upd, Targets: []Target{web}}}}, map[platform.ID]int64{}, "", "did not apply default:deployment/web"},
		{"recorded no workload: a ConfigMap's field", &Plan{Targeted: true, Items: []Item{{Service: webPolicy, Action: Update, Updates: upd}}}, nil, NothingToApplyNoWorkload, ""},
		{"saved without targets, applied one", &Plan{Items: []Item{{Service: id("web"), Action: Update, Updates: upd}}}, applied, "", ""},
		{"saved without targets, applied nothing", &Plan{Items: []Item{{Service: id("web"), Action: Update, Updates: upd}}}, nil, "", "applied nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note, err := mayEndSucceeded(tc.plan, tc.gens)
			if tc.errWants == "" && err != nil || tc.errWants != "" && (err == nil || !strings.Contains(err.Error(), tc.errWants)) {
				t.Errorf("err = %v; want %q", err, tc.errWants)
			}
			if note != tc.note {
				t.Errorf("note = %q; want %q", note, tc.note)
			}
		})
	}
}

// A release with nothing to change succeeds, commits nothing, and says
// why it applied nothing.
func TestEmptyPlanSaysNothingToApply(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": deployment("web", "reg/web:1.2")})
	var notes []string
	res, err := g.e.Execute(context.Background(), "team", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release,
		ExecOptions{Report: func(p Progress) {
			if p.Stage == StageDone {
				notes = append(notes, p.Note)
			}
		}})
	if err != nil || res.Commit != "" {
		t.Fatalf("Execute = %+v, %v; want nothing committed", res, err)
	}
	if len(notes) != 1 || notes[0] != NothingToApply {
		t.Errorf("done reports %q; want one, saying %q", notes, NothingToApply)
	}
	if len(g.cluster.applied) != 0 {
		t.Errorf("applied %v", g.cluster.applied)
	}
}
