package torture

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	web = "default:deployment/web"
	api = "default:deployment/api"
)

func wl(image string, ann ...string) Workload {
	w := Workload{Images: map[string]string{"app": image}, Annotations: map[string]string{}}
	for i := 0; i+1 < len(ann); i += 2 {
		w.Annotations[ann[i]] = ann[i+1]
	}
	return w
}

// history builds an observation from commits given oldest first, each
// the parent of the next.
type builder struct{ o *Observation }

func newBuilder() *builder {
	return &builder{o: &Observation{Commits: map[string]*Commit{}, FluxdCommitter: "fluxd", Cluster: nil}}
}

func (b *builder) commit(hash, committer, msg string, ws map[string]Workload) *builder {
	c := &Commit{Hash: hash, Committer: committer, Message: msg, Workloads: ws}
	if b.o.Head != "" {
		c.Parents = []string{b.o.Head}
	}
	b.o.Commits[hash] = c
	b.o.Order = append(b.o.Order, hash)
	b.o.Head = hash
	if committer != "fluxd" {
		b.o.PersonCommits = append(b.o.PersonCommits, hash)
	}
	return b
}

func checks(vs []Violation) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Check)
	}
	return strings.Join(s, "")
}

// A clean run: a release, a person's hotfix, a fluxd lock, each with its
// rows. No check complains.
func TestCheckCleanRun(t *testing.T) {
	b := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0"), api: wl("r/api:1.0.0")}).
		commit("c1", "fluxd", "Release r/web:1.1.0\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0"), api: wl("r/api:1.0.0")}).
		commit("c2", "pia", "hotfix", map[string]Workload{web: wl("r/web:1.1.1-hotfix"), api: wl("r/api:1.0.0")}).
		commit("c3", "fluxd", "Lock api\n\nFluxd-Job: policy-0a1b\n", map[string]Workload{web: wl("r/web:1.1.1-hotfix"), api: wl("r/api:1.0.0", "fluxd.io/locked", "true")})
	o := b.o
	o.Jobs = []Job{
		{ID: "j1", State: "succeeded", Commit: "c1", User: "u1", Updates: []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}},
		{ID: "j2", State: "failed", User: "u2", Error: "no"},
		{ID: "j3", State: "succeeded", User: "u3"},
	}
	o.Events = []Event{
		{ID: 1, Type: "release", Commit: "c1", User: "u1"},
		{ID: 2, Type: "failed", User: "u2"},
		{ID: 3, Type: "lock", Commit: "c3"},
	}
	o.Cluster = map[string]map[string]string{web: {"app": "r/web:1.1.1-hotfix"}, api: {"app": "r/api:1.0.0"}}
	if vs := Check(o); len(vs) != 0 {
		t.Errorf("violations in a clean run: %v", vs)
	}
}

// Issue 26's first reproduction as git records it: fluxd re-applied its
// edit on top of the person's hotfix and lock. (a) and (b) both fire.
func TestCheckHotfixOverwritten(t *testing.T) {
	o := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0")}).
		commit("c1", "oncall", "hotfix", map[string]Workload{web: wl("r/web:1.0.1-hotfix", "fluxd.io/locked", "true")}).
		commit("c2", "fluxd", "Release r/web:1.1.0\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0", "fluxd.io/locked", "true")}).o
	o.Jobs = []Job{{ID: "j1", State: "succeeded", Commit: "c2", User: "u1", Updates: []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}}}
	o.Events = []Event{{ID: 1, Type: "release", Commit: "c2", User: "u1"}}
	vs := Check(o)
	if got := checks(vs); got != "ab" {
		t.Errorf("checks that fired: %q (%v); want a and b", got, vs)
	}
	if !strings.Contains(vs[0].What, "r/web:1.0.1-hotfix -> r/web:1.1.0") {
		t.Errorf("(a) does not name what the commit really replaced: %s", vs[0])
	}
}

// A release of one service that moved another (a kustomize sibling):
// (a) names the extra change.
func TestCheckSiblingMoved(t *testing.T) {
	o := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0"), api: wl("r/web:1.0.0", "fluxd.io/locked", "true")}).
		commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0"), api: wl("r/web:1.1.0", "fluxd.io/locked", "true")}).o
	o.Jobs = []Job{{ID: "j1", State: "succeeded", Commit: "c1", User: "u", Updates: []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}}}
	o.Events = []Event{{ID: 1, Type: "release", Commit: "c1", User: "u"}}
	if got := checks(Check(o)); got != "ab" {
		t.Errorf("checks that fired: %q; want a and b", got)
	}
}

func TestCheckRevertAndPolicyCommits(t *testing.T) {
	o := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0")}).
		commit("c1aaaaaaaaaaaaaa", "fluxd", "Release\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0")}).
		commit("c2", "fluxd", "Revert release c1aaaaaaaaaa in e2e\n\nrollout failed\n", map[string]Workload{web: wl("r/web:1.0.0")}).
		commit("c3", "fluxd", "Automate web", map[string]Workload{web: wl("r/web:1.2.0", "fluxd.io/automated", "true")}).o
	o.Jobs = []Job{{ID: "j1", State: "failed", Commit: "c1aaaaaaaaaaaaaa", User: "u", Updates: []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}}}
	o.Events = []Event{{ID: 1, Type: "rollback", Commit: "c2"}, {ID: 2, Type: "failed", Commit: "c1aaaaaaaaaaaaaa", User: "u"}}
	vs := Check(o)
	if got := checks(vs); got != "a" || !strings.Contains(vs[0].What, "a fluxd commit of no job changes images") {
		t.Errorf("violations: %v; want only (a) for the policy commit that changed an image", vs)
	}
}

func TestCheckLostPersonAndStuckJob(t *testing.T) {
	o := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0")}).o
	o.PersonCommits = append(o.PersonCommits, "gone")
	o.Jobs = []Job{{ID: "j1", State: "queued", User: "u"}}
	if got := checks(Check(o)); got != "cd" {
		t.Errorf("checks that fired: %q; want c and d", got)
	}
}

// Outcomes that git contradicts, and history rows missing or doubled.
func TestCheckOutcomesAndRows(t *testing.T) {
	o := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0"), api: wl("r/api:1.0.0")}).
		commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0"), api: wl("r/api:1.0.0")}).o
	o.Jobs = []Job{
		// Its push errored but landed; recorded as failed with no commit.
		{ID: "j1", State: "failed", User: "u1", Updates: []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}},
		// Cancelled before its push: no row (item 8).
		{ID: "j2", State: "cancelled", User: "u2"},
		// Succeeded with a commit nobody can find.
		{ID: "j3", State: "succeeded", Commit: "zz", User: "u3", Updates: []Update{{api, "app", "r/api:1.0.0", "r/api:1.1.0"}}},
	}
	o.Events = []Event{
		{ID: 1, Type: "failed", User: "u1"},
		{ID: 2, Type: "release", Commit: "zz", User: "u3"},
		{ID: 3, Type: "release", Commit: "zz", User: "u3"},
		// A policy push that errored but landed, recorded as failed (item 8).
		{ID: 4, Type: "failed", Commit: "c1", User: "u4", Services: []string{web}, Error: "pushing: connection lost"},
		// A lock refused before its push: not a job's row.
		{ID: 5, Type: "failed", User: "u5", Services: []string{web}, Error: "the branch moved"},
	}
	o.Cluster = map[string]map[string]string{web: {"app": "r/web:1.0.0"}}
	vs := Check(o)
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	for _, v := range vs {
		if strings.Contains(v.What, "u5") {
			t.Errorf("a failed policy change counted as a job's row: %s", v)
		}
	}
	for _, w := range []string{
		"(e) job j1 ended failed recording no commit, but commit c1 in the branch is its",
		"(e) job j3 ended succeeded recording commit zz, which is not in the branch",
		"(e) default:deployment/web container app runs r/web:1.0.0 in the cluster; git's head c1 says r/web:1.1.0",
		"(e) default:deployment/api is in git but not in the cluster",
		"(f) job j3 succeeded with commit zz: 2 release rows name it; want 1",
		"(f) history row 4 (failed, by u4, default:deployment/web) names commit c1, which no job recorded, which is in the branch: the push it records as failed landed",
		"(f) 1 jobs of u2 ended cancelled without a commit (j2) but history has 0 cancelled rows of u2 without one",
	} {
		found := false
		for _, g := range got {
			if strings.HasPrefix(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no violation %q among:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func TestParseWorkloadsAndDiff(t *testing.T) {
	files := map[string][]byte{"d/web.yaml": []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    fluxd.io/locked: "true"
spec:
  template:
    spec:
      containers:
        - name: app
          image: r/web:1.0.0
---
apiVersion: v1
kind: Service
metadata: {name: web}
`)}
	got, err := ParseWorkloads(files)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Workload{web: wl("r/web:1.0.0", "fluxd.io/locked", "true")}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	ups, other := Diff(got, map[string]Workload{web: wl("r/web:1.1.0")})
	if d := cmp.Diff([]Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}, ups); d != "" || len(other) != 1 {
		t.Errorf("diff: (-want +got)\n%s\nother %v", d, other)
	}
}

func TestGenerateReplays(t *testing.T) {
	svcs := []Service{{Name: "a", Repo: "ra"}, {Name: "b", Repo: "rb"}, {Name: "p", Repo: "rp", Format: ImagePolicy}}
	one, two := Generate(42, 200, svcs), Generate(42, 200, svcs)
	if d := cmp.Diff(one, two); d != "" {
		t.Fatalf("one seed, two runs: (-first +second)\n%s", d)
	}
	if d := cmp.Diff(one, Generate(43, 200, svcs)); d == "" {
		t.Error("seeds 42 and 43 drew the same run")
	}
	kinds := map[Kind]bool{}
	for _, op := range one {
		kinds[op.Kind] = true
		if op.Service == "p" && (op.Kind == Automate || op.Kind == Deautomate) {
			t.Errorf("step %d: %s drawn for the ImagePolicy's service, which it does not apply to", op.Step, op.Kind)
		}
		if wantTarget := op.Service == "p" && (op.Kind == LockGit || op.Kind == RaceHotfix); wantTarget != (op.Target != "") {
			t.Errorf("step %d: %s of %s with lock target %q", op.Step, op.Kind, op.Service, op.Target)
		}
	}
	for _, w := range weights {
		if !kinds[w.kind] {
			t.Errorf("200 steps never drew %s", w.kind)
		}
	}
	if !strings.Contains(Log(one[:1]), "  1 ") {
		t.Errorf("log line: %q", Log(one[:1]))
	}
}

func TestEnforced(t *testing.T) {
	vs := []Violation{{"a", "x"}, {"b", "y"}, {"e", "z"}}
	enf, rep := Enforced(vs, "ae")
	if checks(enf) != "ae" || checks(rep) != "b" {
		t.Errorf("enforced %v, reported %v", enf, rep)
	}
}

// The run's Flux v2 service as files: a Deployment whose image is marked
// whole, a ConfigMap whose tag is marked :tag, and the Flux v2 objects.
const (
	pol        = "flux-system:imagepolicy/pe"
	pe         = "default:deployment/pe"
	peImage    = "t/pe.yaml:Deployment/default/pe:spec.template.spec.containers[0].image"
	peTag      = "t/pe.yaml:ConfigMap/default/pe-config:data.TAG"
	peWorkload = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: pe
  annotations:
    owner: team
spec:
  template:
    spec:
      containers:
        - name: app
          image: r/pe:1.0.0 # {"$imagepolicy": "flux-system:pe"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: pe-config
data:
  TAG: "1.0.0"   # {"$imagepolicy": "flux-system:pe:tag"}
  OTHER: "1.0.0" # not a marker
`
	pePolicy = `apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: pe
  namespace: flux-system
spec:
  image: r/pe
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: pe
  namespace: flux-system
  annotations:
    owner: team
spec:
  imageRepositoryRef:
    name: pe
  policy:
    semver:
      range: ">=1.0.0"
`
)

// peFiles parses the two files, after edit (nil: none) of each.
func peFiles(t *testing.T, workload, policy string) map[string]Workload {
	t.Helper()
	ws, err := ParseWorkloads(map[string][]byte{"t/pe.yaml": []byte(workload), "t/pe-automation.yaml": []byte(policy)})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// The model reads an ImagePolicy's service as fluxd names it: fields
// FILE:KIND/NAME:PATH, a :tag field's image from its ImageRepository,
// the Deployment holding a field, the field's line with its value
// masked; the Deployment's marked container is its policy's.
func TestParseFluxV2(t *testing.T) {
	ws := peFiles(t, peWorkload, pePolicy)
	want := map[string]Workload{
		pe: {Images: map[string]string{"app": "r/pe:1.0.0"}, Annotations: map[string]string{"owner": "team"}, Marked: map[string]bool{"app": true}},
		pol: {
			Images:      map[string]string{peImage: "r/pe:1.0.0", peTag: "r/pe:1.0.0"},
			Annotations: map[string]string{"owner": "team"},
			Holders:     []string{pe},
			Kept: map[string]string{
				peImage: `          image: … # {"$imagepolicy": "flux-system:pe"}`,
				peTag:   `  TAG: "…"   # {"$imagepolicy": "flux-system:pe:tag"}`,
			},
		},
	}
	if d := cmp.Diff(want, ws); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	// A person's hotfix of the marked fields keeps each marker; a lock
	// of the Deployment locks the policy.
	hot := SetLocked(SetMarked(peWorkload, "r/pe:1.0.1-hotfix.1"), true)
	if !strings.Contains(hot, `image: r/pe:1.0.1-hotfix.1 # {"$imagepolicy": "flux-system:pe"}`) || !strings.Contains(hot, `TAG: "1.0.1-hotfix.1"   # {"$imagepolicy": "flux-system:pe:tag"}`) || !strings.Contains(hot, `OTHER: "1.0.0" # not a marker`) {
		t.Errorf("the hotfix did not set exactly the marked values:\n%s", hot)
	}
	after := peFiles(t, hot, pePolicy)
	ups, other := Diff(ws, after)
	wantUps := []Update{{pol, peTag, "r/pe:1.0.0", "r/pe:1.0.1-hotfix.1"}, {pol, peImage, "r/pe:1.0.0", "r/pe:1.0.1-hotfix.1"}}
	if d := cmp.Diff(wantUps, ups); d != "" || len(other) != 1 || other[0] != pe+" (annotations)" {
		t.Errorf("diff: (-want +got)\n%s\nother %v", d, other)
	}
	if locked, why := LockedIn(after, pol); !locked || !strings.Contains(why, pe) {
		t.Errorf("a lock on the Deployment holding the policy's field: LockedIn %v %q", locked, why)
	}
	if locked, _ := LockedIn(peFiles(t, peWorkload, SetLocked(pePolicy, true)), pol); !locked {
		t.Error("a lock on the ImagePolicy does not lock its service")
	}
}

// (a) on an ImagePolicy's release: a commit that sets the marked fields
// as planned passes (the Deployment's marked image is not an extra
// change); one that also rewrites a marker comment, or the spacing
// before it, is not its plan.
func TestCheckFluxV2ReleaseKeepsMarkers(t *testing.T) {
	plan := []Update{{pol, peImage, "r/pe:1.0.0", "r/pe:1.0.1"}, {pol, peTag, "r/pe:1.0.0", "r/pe:1.0.1"}}
	released := strings.ReplaceAll(peWorkload, "1.0.0 #", "1.0.1 #")
	released = strings.Replace(released, `"1.0.0"   #`, `"1.0.1"   #`, 1)
	for _, tc := range []struct {
		name, workload, want string
	}{
		{"marker broken", strings.Replace(released, `"flux-system:pe:tag"}`, `"flux-system:pe:tag" }`, 1), "a"},
		{"as planned", released, ""},
		{"comment respaced", strings.Replace(released, `"1.0.1"   # {`, `"1.0.1"   #  {`, 1), "a"},
		{"spacing before the marker", strings.Replace(released, `"1.0.1"   #`, `"1.0.1" #`, 1), "a"},
		{"quotes dropped", strings.Replace(released, `"1.0.1"   #`, `1.0.1   #`, 1), "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newBuilder().
				commit("c0", "seed", "Add", peFiles(t, peWorkload, pePolicy)).
				commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", peFiles(t, tc.workload, pePolicy)).o
			o.Jobs = []Job{{ID: "j1", State: "succeeded", Commit: "c1", User: "u", Updates: plan}}
			o.Events = []Event{{ID: 1, Type: "release", Commit: "c1", User: "u"}}
			vs := Check(o)
			if got := checks(vs); got != tc.want {
				t.Errorf("checks that fired: %q (%v); want %q", got, vs, tc.want)
			}
			if tc.want == "a" && tc.name != "marker broken" && len(vs) > 0 && !strings.Contains(vs[0].What, "the text of "+peTag) {
				t.Errorf("(a) does not name the marker line: %s", vs[0])
			}
		})
	}
}

// (b) on an ImagePolicy: fluxd's commit setting its fields while a
// person's lock holds the Deployment that one of them sets (the bug
// found by hand: the policy moved a workload locked in git), or the
// ImagePolicy itself, breaks (b); with no lock it does not.
func TestCheckFluxV2LockedByItsWorkload(t *testing.T) {
	released := strings.ReplaceAll(peWorkload, "1.0.0 #", "1.0.1 #")
	plan := []Update{{pol, peImage, "r/pe:1.0.0", "r/pe:1.0.1"}}
	for _, tc := range []struct {
		name             string
		workload, policy func(string) string
		want             string
	}{
		{"unlocked", func(y string) string { return y }, func(y string) string { return y }, ""},
		{"workload locked in git", func(y string) string { return SetLocked(y, true) }, func(y string) string { return y }, "b"},
		{"ImagePolicy locked", func(y string) string { return y }, func(y string) string { return SetLocked(y, true) }, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newBuilder().
				commit("c0", "seed", "Add", peFiles(t, peWorkload, pePolicy)).
				commit("c1", "person", "Lock", peFiles(t, tc.workload(peWorkload), tc.policy(pePolicy))).
				commit("c2", "fluxd", "Release\n\nFluxd-Job: j1\n", peFiles(t, tc.workload(released), tc.policy(pePolicy))).o
			o.Jobs = []Job{{ID: "j1", State: "succeeded", Commit: "c2", User: "u", Updates: plan}}
			o.Events = []Event{{ID: 1, Type: "release", Commit: "c2", User: "u"}}
			vs := Check(o)
			if got := checks(vs); got != tc.want {
				t.Errorf("checks that fired: %q (%v); want %q", got, vs, tc.want)
			}
		})
	}
}

// (e) judges the Deployment that a marked field sets, by that field's
// value; the ImagePolicy itself is no object in the cluster.
func TestCheckFluxV2Cluster(t *testing.T) {
	o := newBuilder().commit("c0", "seed", "Add", peFiles(t, peWorkload, pePolicy)).o
	o.Cluster = map[string]map[string]string{pe: {"app": "r/pe:1.0.0"}}
	if vs := Check(o); len(vs) != 0 {
		t.Errorf("violations when the cluster runs the marked image: %v", vs)
	}
	o.Cluster[pe]["app"] = "r/pe:0.9.0"
	if vs := Check(o); checks(vs) != "e" || len(vs) == 0 || !strings.Contains(vs[0].What, pe+" container app runs r/pe:0.9.0") {
		t.Errorf("violations when the cluster runs another image: %v; want (e) naming the Deployment", vs)
	}
}

const (
	hr     = "default:helmrelease/hr"
	hrFile = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hr
  annotations:
    owner: team
spec:
  interval: 5m
  values:
    # the app's image
    image:
      repository: r/hr
      tag: "1.0.0" # set by fluxd
    replicaCount: 2
`
)

func hrFiles(t *testing.T, y string) map[string]Workload {
	t.Helper()
	ws, err := ParseWorkloads(map[string][]byte{"t/hr.yaml": []byte(y)})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// The model reads a HelmRelease's image: {repository, tag} as fluxd's
// chart-image, and keeps its values block, values masked; a person's
// hotfix sets the tag in its quotes.
func TestParseHelmRelease(t *testing.T) {
	want := map[string]Workload{hr: {
		Images:      map[string]string{HelmContainer: "r/hr:1.0.0"},
		Annotations: map[string]string{"owner": "team"},
		Kept: map[string]string{HelmContainer: `  values:
    # the app's image
    image:
      repository: …
      tag: "…" # set by fluxd
    replicaCount: 2`},
	}}
	if d := cmp.Diff(want, hrFiles(t, hrFile)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	hot := SetHelmTag(hrFile, "1.0.1-hotfix.1")
	if !strings.Contains(hot, `tag: "1.0.1-hotfix.1" # set by fluxd`) {
		t.Errorf("a person's hotfix of the HelmRelease:\n%s", hot)
	}
}

// (a) on a HelmRelease's release: the tag's bytes may change, nothing
// else in its values; (b): not while its annotation locks it.
func TestCheckHelmReleaseValues(t *testing.T) {
	plan := []Update{{hr, HelmContainer, "r/hr:1.0.0", "r/hr:1.0.1"}}
	released := strings.Replace(hrFile, `"1.0.0"`, `"1.0.1"`, 1)
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"as planned", hrFile, released, ""},
		{"a comment in values rewritten", hrFile, strings.Replace(released, "# the app's image", "# the image", 1), "a"},
		{"quotes dropped", hrFile, strings.Replace(released, `"1.0.1"`, `1.0.1`, 1), "a"},
		{"another value moved", hrFile, strings.Replace(released, "replicaCount: 2", "replicaCount: 3", 1), "a"},
		{"locked", SetLocked(hrFile, true), SetLocked(released, true), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newBuilder().
				commit("c0", "seed", "Add", hrFiles(t, tc.before)).
				commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", hrFiles(t, tc.after)).o
			o.Jobs = []Job{{ID: "j1", State: "succeeded", Commit: "c1", User: "u", Updates: plan}}
			o.Events = []Event{{ID: 1, Type: "release", Commit: "c1", User: "u"}}
			if got := checks(Check(o)); got != tc.want {
				t.Errorf("checks that fired: %q (%v); want %q", got, Check(o), tc.want)
			}
		})
	}
}

// (e) with no Helm controller: a job moving a HelmRelease ends "applied,
// not rolled out" in its stage and its rows, and only such a job; the
// cluster's HelmRelease holds git's values.
func TestCheckHelmReleaseNotRolledOut(t *testing.T) {
	released := strings.Replace(hrFile, `"1.0.0"`, `"1.0.1"`, 1)
	const note = "Release r/hr:1.0.1; committed and applied, not rolled out: nothing reported on the rollout of default:helmrelease/hr within 1m0s"
	for _, tc := range []struct {
		name         string
		stage, msg   string
		moves        string
		cluster      string
		wantFragment string
	}{
		{"helm, said so", "applied, not rolled out", note, hr, "r/hr:1.0.1", ""},
		{"helm, claims a rollout", "done", "Release r/hr:1.0.1", hr, "r/hr:1.0.1", "ended at stage \"done\""},
		{"deployment, says not rolled out", "applied, not rolled out", note, web, "r/hr:1.0.1", "moved no HelmRelease"},
		{"helm, cluster behind", "applied, not rolled out", note, hr, "r/hr:1.0.0", "container chart-image runs r/hr:1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := hrFiles(t, released)
			ws[web] = wl("r/web:1.1.0")
			before := hrFiles(t, hrFile)
			before[web] = wl("r/web:1.0.0")
			o := newBuilder().
				commit("c0", "seed", "Add", before).
				commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", ws).o
			plan := []Update{{hr, HelmContainer, "r/hr:1.0.0", "r/hr:1.0.1"}}
			if tc.moves == web {
				// The same commit, judged as if its job had planned the
				// Deployment only: (a) fires too, (e) is what is looked at.
				plan = []Update{{web, "app", "r/web:1.0.0", "r/web:1.1.0"}}
			} else {
				plan = append(plan, Update{web, "app", "r/web:1.0.0", "r/web:1.1.0"})
			}
			o.Jobs = []Job{{ID: "j1", State: "succeeded", Stage: tc.stage, Commit: "c1", User: "u", Updates: plan}}
			o.Events = []Event{{ID: 1, Type: "release", Commit: "c1", User: "u", Message: tc.msg}}
			o.HelmUnreported = true
			o.Cluster = map[string]map[string]string{web: {"app": "r/web:1.1.0"}, hr: {HelmContainer: tc.cluster}}
			var es []string
			for _, v := range CheckOutcomes(o) {
				es = append(es, v.What)
			}
			got := strings.Join(es, "\n")
			if tc.wantFragment == "" && got != "" || tc.wantFragment != "" && !strings.Contains(got, tc.wantFragment) {
				t.Errorf("(e) says:\n%s\nwant %q", got, tc.wantFragment)
			}
		})
	}
}

// (e) on an automated batch moving a HelmRelease and a Deployment, with
// no Helm controller: one row per service; the HelmRelease's says "not
// rolled out", the Deployment's does not (torture seed 119 found both
// rows silent).
func TestCheckHelmReleaseBatchRows(t *testing.T) {
	released := strings.Replace(hrFile, `"1.0.0"`, `"1.0.1"`, 1)
	const note = "; committed and applied, not rolled out: nothing reported on the rollout of default:helmrelease/hr within 1m0s"
	for _, tc := range []struct {
		name         string
		hrMsg, wMsg  string
		wantFragment string
	}{
		{"the HelmRelease's row says so", "automated release of hr" + note, "automated release of web", ""},
		{"both rows silent", "automated release of hr", "automated release of web", "history row 2 of job j1 (default:helmrelease/hr) claims a rollout"},
		{"both rows say so", "automated release of hr" + note, "automated release of web" + note, "history row 1 of job j1 (default:deployment/web) says not rolled out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := hrFiles(t, hrFile), hrFiles(t, released)
			before[web], after[web] = wl("r/web:1.0.0"), wl("r/web:1.1.0")
			o := newBuilder().
				commit("c0", "seed", "Add", before).
				commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", after).o
			plan := []Update{{hr, HelmContainer, "r/hr:1.0.0", "r/hr:1.0.1"}, {web, "app", "r/web:1.0.0", "r/web:1.1.0"}}
			o.Jobs = []Job{{ID: "j1", State: "succeeded", Stage: "applied, not rolled out", Commit: "c1", User: "automator", Automated: true, Updates: plan}}
			o.Events = []Event{
				{ID: 1, Type: "automated-release", Commit: "c1", User: "automator", Services: []string{web}, Message: tc.wMsg},
				{ID: 2, Type: "automated-release", Commit: "c1", User: "automator", Services: []string{hr}, Message: tc.hrMsg},
			}
			o.HelmUnreported = true
			var es []string
			for _, v := range Check(o) {
				es = append(es, v.String())
			}
			got := strings.Join(es, "\n")
			if tc.wantFragment == "" && got != "" || tc.wantFragment != "" && !strings.Contains(got, tc.wantFragment) {
				t.Errorf("violations:\n%s\nwant %q", got, tc.wantFragment)
			}
		})
	}
}

// (g): a format no fluxd commit moved fails the run, naming it; a
// person's commit does not count, nor a fluxd commit of another format.
func TestCheckFormatsReached(t *testing.T) {
	g := "default:deployment/g"
	b := newBuilder().
		commit("c0", "seed", "Add", map[string]Workload{web: wl("r/web:1.0.0"), g: wl("r/g:1.0.0")}).
		commit("c1", "fluxd", "Release\n\nFluxd-Job: j1\n", map[string]Workload{web: wl("r/web:1.1.0"), g: wl("r/g:1.0.0")}).
		commit("c2", "pia", "hotfix", map[string]Workload{web: wl("r/web:1.1.0"), g: wl("r/g:1.0.1")})
	b.o.Formats = map[string]Format{web: Plain, g: Kustomize}
	vs := CheckFormatsReached(b.o)
	if checks(vs) != "g" || !strings.Contains(vs[0].What, "format kustomize ("+g+")") {
		t.Errorf("violations %v", vs)
	}
	if n := FormatCommits(b.o); n[Plain] != 1 || n[Kustomize] != 0 {
		t.Errorf("counts %v", n)
	}
	b.commit("c3", "fluxd", "Release\n\nFluxd-Job: j2\n", map[string]Workload{web: wl("r/web:1.2.0"), g: wl("r/g:1.0.2")})
	if vs := CheckFormatsReached(b.o); len(vs) != 0 {
		t.Errorf("violations %v", vs)
	}
	if n := FormatCommits(b.o); n[Plain] != 2 || n[Kustomize] != 1 {
		t.Errorf("counts %v", n)
	}
	b.o.Formats = nil
	if vs := CheckFormatsReached(b.o); len(vs) != 0 {
		t.Errorf("no formats given: violations %v", vs)
	}
}
