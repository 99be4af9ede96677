package promotion

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

func TestParseMinimalShape(t *testing.T) {
	b, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps, problems := Parse("pipelines/web.yaml", b)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []Pipeline{{
		Name: "web", Namespace: "team", File: "pipelines/web.yaml", Line: 2,
		Stages: []Stage{
			{Name: "dev", Services: []platform.ID{{Namespace: "team-dev", Kind: "deployment", Name: "web"}}, Line: 7},
			{Name: "staging", From: "dev", Services: []platform.ID{{Namespace: "team-staging", Kind: "deployment", Name: "web"}},
				Auto: true, Soak: 5 * time.Second, Line: 9,
				Checks: []Check{{Name: "http-0", Line: 15, HTTP: &HTTPCheck{URL: "http://127.0.0.1:8080/healthz", Timeout: DefaultCheckTimeout, Interval: DefaultCheckInterval}}}},
			{Name: "prod", From: "staging", Services: []platform.ID{{Namespace: "team-prod", Kind: "deployment", Name: "web"}}, Approvals: 1, Line: 16},
		},
	}}
	if d := cmp.Diff(want, ps); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestParseEveryCheckKind(t *testing.T) {
	src := `apiVersion: fluxd.io/v1
kind: Pipeline
metadata:
  name: api
spec:
  stages:
  - name: dev
    services: ["team-dev:helmrelease/api", "team-dev:imagepolicy/api"]
    rollbackOnFailure: true
    checks:
    - name: smoke
      job:
        timeout: 2m
        template:
          spec:
            restartPolicy: Never
            containers: [{name: smoke, image: busybox, command: ["true"]}]
    - prometheus:
        url: http://127.0.0.1:9090
        query: sum(rate(http_requests_total{code=~"5.."}[1m]))
        op: "<"
        threshold: 0.5
    - http: {url: "https://api.example/healthz", timeout: 3s, retries: 4, interval: 1s}
`
	ps, problems := Parse("p.yaml", []byte(src))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	st := ps[0].Stages[0]
	if !st.RollbackOnFailure || len(st.Checks) != 3 {
		t.Fatalf("stage: %+v", st)
	}
	if c := st.Checks[0]; c.Name != "smoke" || c.Job == nil || c.Job.Timeout != 2*time.Minute || c.Job.Template["spec"] == nil {
		t.Errorf("job check: %+v", c)
	}
	if c := st.Checks[1]; c.Name != "prometheus-1" || c.Prometheus == nil || c.Prometheus.Op != "<" || c.Prometheus.Threshold != 0.5 {
		t.Errorf("prometheus check: %+v", c)
	}
	if c := st.Checks[2]; c.HTTP == nil || c.HTTP.Retries != 4 || c.HTTP.Timeout != 3*time.Second || c.HTTP.Interval != time.Second {
		t.Errorf("http check: %+v", c)
	}
}

// Each bad Pipeline is refused with its file, line and what is wrong;
// the good ones beside it are still read.
func TestParseProblems(t *testing.T) {
	head := "apiVersion: fluxd.io/v1\nkind: Pipeline\nmetadata: {name: p}\nspec:\n  stages:\n"
	good := "---\napiVersion: fluxd.io/v1\nkind: Pipeline\nmetadata: {name: ok}\nspec:\n  stages:\n  - name: dev\n    services: [a:deployment/x]\n"
	for _, tc := range []struct {
		name, stages string
		line         int
		want         string
	}{
		{"no stages", "", 1, "has no spec.stages"},
		{"misspelt field", "  - name: dev\n    services: [a:deployment/web]\n    sevices: []\n", 8, "stage 1 has no field sevices"},
		{"misspelt field, and the rest still checked", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - http: {url: \"ftp://x\"}\n  - name: qa\n    from: dev\n    aprovals: 1\n    services: [b:deployment/web]\n", 9, "not an http:// or https:// URL"},
		{"misspelt field, reported beside the rest", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - http: {url: \"ftp://x\"}\n  - name: qa\n    from: dev\n    aprovals: 1\n    services: [b:deployment/web]\n", 12, "stage 2 has no field aprovals"},
		{"from a later stage", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    from: prod\n    services: [b:deployment/web]\n  - name: prod\n    from: qa\n    services: [c:deployment/web]\n", 8, `takes from "prod", which is not an earlier stage`},
		{"from itself", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    from: qa\n    services: [b:deployment/web]\n", 8, "not an earlier stage"},
		{"no from", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    services: [b:deployment/web]\n", 8, "has no from"},
		{"first stage with from", "  - name: dev\n    from: ci\n    services: [a:deployment/web]\n", 6, "the first stage"},
		{"first stage with approvals", "  - name: dev\n    approvals: 2\n    services: [a:deployment/web]\n", 6, "gate promotion into a stage"},
		{"bad service", "  - name: dev\n    services: [web]\n", 6, "not of the form namespace:kind/name"},
		{"unknown kind", "  - name: dev\n    services: [a:pod/web]\n", 6, `has kind "pod"`},
		{"service twice", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    from: dev\n    services: [a:deployment/web]\n", 8, "belongs to one stage"},
		{"duplicate stage", "  - name: dev\n    services: [a:deployment/web]\n  - name: dev\n    from: dev\n    services: [b:deployment/web]\n", 8, "named twice"},
		{"bad stage name", "  - name: Dev_1\n    services: [a:deployment/web]\n", 6, "not a DNS label"},
		{"bad soak", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    from: dev\n    soak: 5 minutes\n    services: [b:deployment/web]\n", 8, "is not a duration"},
		{"negative approvals", "  - name: dev\n    services: [a:deployment/web]\n  - name: qa\n    from: dev\n    approvals: -1\n    services: [b:deployment/web]\n", 8, "0 or more"},
		{"two check kinds", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - http: {url: http://x/}\n      job: {template: {spec: {}}}\n", 9, "has 2 of http, job and prometheus"},
		{"no check kind", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - name: nothing\n", 9, "has 0 of http"},
		{"http url", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - http: {url: \"file:///etc/passwd\"}\n", 9, "not an http:// or https:// URL"},
		{"prometheus op", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - prometheus: {url: \"http://p:9090\", query: up, op: \"=~\", threshold: 1}\n", 9, "is not one of"},
		{"prometheus threshold", "  - name: dev\n    services: [a:deployment/web]\n    checks:\n    - prometheus: {url: \"http://p:9090\", query: up, op: \">\"}\n", 9, "has no threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, problems := Parse("pipelines.yaml", []byte(head+tc.stages+good))
			if len(ps) != 1 || ps[0].Name != "ok" {
				t.Errorf("the good Pipeline beside the bad one: got %+v", ps)
			}
			if len(problems) == 0 {
				t.Fatalf("no problem reported")
			}
			var all []string
			found := false
			for _, p := range problems {
				all = append(all, p.Error())
				if p.File == "pipelines.yaml" && strings.Contains(p.Error(), tc.want) && p.Line == tc.line {
					found = true
				}
			}
			if !found {
				t.Errorf("want a problem at pipelines.yaml:%d containing %q; got:\n%s", tc.line, tc.want, strings.Join(all, "\n"))
			}
		})
	}
}

func TestParseMalformedAndOtherVersions(t *testing.T) {
	_, problems := Parse("x.yaml", []byte("apiVersion: fluxd.io/v1\nkind: Pipeline\nmetadata: {name: [\n"))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "malformed YAML") {
		t.Errorf("malformed: %v", problems)
	}
	_, problems = Parse("x.yaml", []byte("apiVersion: fluxd.io/v2\nkind: Pipeline\nmetadata: {name: p}\n"))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "fluxd reads fluxd.io/v1") {
		t.Errorf("other version: %v", problems)
	}
	ps, problems := Parse("x.yaml", []byte("apiVersion: pipelines.example/v1\nkind: Pipeline\nmetadata: {name: p}\n"))
	if len(ps)+len(problems) != 0 {
		t.Errorf("another group's Pipeline is not fluxd's: %v %v", ps, problems)
	}
}

func TestCheckAll(t *testing.T) {
	p := func(name, file string, svc string) Pipeline {
		id, _ := platform.ParseID(svc)
		return Pipeline{Name: name, Namespace: "team", File: file, Line: 1, Stages: []Stage{{Name: "dev", Services: []platform.ID{id}, Line: 7}}}
	}
	problems := CheckAll([]Pipeline{p("a", "a.yaml", "x:deployment/web"), p("b", "b.yaml", "x:deployment/web"), p("a", "c.yaml", "y:deployment/web")})
	if len(problems) != 2 {
		t.Fatalf("problems: %v", problems)
	}
	if !strings.Contains(problems[0].Error(), "b.yaml:7: service x:deployment/web is in Pipeline team/b and in Pipeline team/a (a.yaml:1)") {
		t.Errorf("service in two pipelines: %v", problems[0])
	}
	if !strings.Contains(problems[1].Error(), "c.yaml:1: Pipeline team/a is also defined at a.yaml:1") {
		t.Errorf("twice: %v", problems[1])
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/minimal.yaml")
	f.Add(b)
	f.Add([]byte("apiVersion: fluxd.io/v1\nkind: Pipeline\nmetadata: {name: p}\nspec: {stages: [{name: a, services: [b]}]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, _ := Parse("f.yaml", b)
		for _, p := range ps {
			if len(p.Stages) == 0 || p.Stages[0].From != "" {
				t.Fatalf("a parsed pipeline breaks Parse's own rules: %+v", p)
			}
			for i, s := range p.Stages[1:] {
				found := false
				for _, e := range p.Stages[:i+1] {
					found = found || e.Name == s.From
				}
				if !found {
					t.Fatalf("stage %s takes from %q, not an earlier stage", s.Name, s.From)
				}
			}
		}
	})
}
