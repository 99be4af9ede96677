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
	svcs := []Service{{"a", "ra"}, {"b", "rb"}}
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
