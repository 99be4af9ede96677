package deploy

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/fluxd/fluxd/internal/giturl"
)

var update = flag.Bool("update", false, "write the chart's generated templates (make generate)")

// The checked-in chart templates are what deploy/chart.go generates from
// the base: editing a base file without regenerating, or a template by
// hand, fails here. 'make generate' (this test with -update) writes them.
func TestChartIsGenerated(t *testing.T) {
	if *update {
		if err := WriteChart("."); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ChartTemplates()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ChartDir, "templates")
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v: run 'make generate' and commit the chart", err)
			continue
		}
		if d := cmp.Diff(string(b), string(got)); d != "" {
			t.Errorf("%s/%s is stale (-generated +checked in):\n%s\nRun 'make generate' and commit the result: the chart is generated from deploy/%s.", dir, name, d, name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok && e.Name() != "_helpers.tpl" && e.Name() != "NOTES.txt" {
			t.Errorf("%s/%s is neither generated nor the chart's frame: the chart's objects come from deploy/ (deploy/chart.go)", dir, e.Name())
		}
	}
}

// helmTemplate renders the chart as 'helm template' does, with Helm's own
// engine, into fluxd's namespace.
func helmTemplate(t *testing.T, namespace string, values map[string]any) (string, error) {
	t.Helper()
	ch, err := loader.Load(ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "fluxd", namespace
	rel, err := install.Run(ch, values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// chartValues are the chart's values for the install o describes.
// valueOf names the value each field of Options maps to; a field added to
// Options without a value here fails TestChartMatchesInstall.
func chartValues(o Options) map[string]any {
	v := map[string]any{
		"image":           o.Image,
		"git":             map[string]any{"url": o.GitURL, "branch": o.GitBranch, "paths": anys(o.GitPaths)},
		"watchNamespaces": anys(o.Watch),
		"replicas":        max(o.Replicas, 1),
		"historyDBSecret": o.HistoryDBSecret,
		"createNamespace": !o.NoNamespace,
	}
	return v
}

var valueOf = map[string]string{
	"Namespace": "the release's namespace", "Watch": "watchNamespaces", "GitURL": "git.url", "GitBranch": "git.branch",
	"GitPaths": "git.paths", "Image": "image", "NoNamespace": "createNamespace", "Replicas": "replicas", "HistoryDBSecret": "historyDBSecret",
}

func anys(ss []string) []any {
	if ss == nil {
		return nil
	}
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// objects decodes a YAML stream into its objects by kind/namespace/name.
func objects(t *testing.T, stream string) map[string]any {
	t.Helper()
	out := map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(stream))
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding: %v\n%s", err, stream)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%v/%v/%v", obj["kind"], meta["namespace"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice in the stream", key)
		}
		out[key] = obj
	}
}

// compareInstalls renders o with Render and the chart, and reports how
// their objects differ, or that both refuse o; it says whether they
// rendered.
func compareInstalls(t *testing.T, o Options) (rendered bool) {
	t.Helper()
	ns := o.Namespace
	if ns == "" {
		ns = baseNamespace
	}
	want, werr := Render(o)
	got, gerr := helmTemplate(t, ns, chartValues(o))
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil {
			t.Errorf("%+v: Render: %v; the chart: %v; want both to refuse or both to render", o, werr, gerr)
		}
		return false
	}
	wantObjs, gotObjs := objects(t, string(want)), objects(t, got)
	// The one difference on purpose (chart.go): Helm keeps the deploy key
	// Secret on uninstall.
	key := "Secret/" + ns + "/fluxd-ssh"
	if s, ok := gotObjs[key].(map[string]any); ok {
		meta := s["metadata"].(map[string]any)
		if a, _ := meta["annotations"].(map[string]any); a[keepAnnotation] != keepValue {
			t.Errorf("%+v: the chart's fluxd-ssh lacks %s: %s: %v", o, keepAnnotation, keepValue, meta)
		} else {
			delete(a, keepAnnotation)
			if len(a) == 0 {
				delete(meta, "annotations")
			}
		}
	}
	if d := cmp.Diff(wantObjs, gotObjs); d != "" {
		t.Errorf("%+v: the chart's objects differ from fluxctl install's (-install +chart):\n%s", o, d)
	}
	return true
}

// The chart and 'fluxctl install' render the same objects for the same
// options: defaults, each option, SSH and HTTPS remotes, the HA variant,
// values the kubelet would expand, and options both refuse.
func TestChartMatchesInstall(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Options]()) {
		if _, ok := valueOf[f.Name]; !ok {
			t.Errorf("Options.%s has no chart value: add one to the chart (values.yaml, chart.go) and to chartValues", f.Name)
		}
	}
	img := "reg.example/fluxd:v1"
	cases := []Options{
		{GitURL: "https://git.example/org/manifests.git", Image: img},
		{GitURL: "https://git.example/org/manifests.git", Image: img, NoNamespace: true},
		{Namespace: "gitops", Watch: []string{"apps", "web"}, GitURL: "ssh://git@git.example/org/manifests.git", GitBranch: "prod", GitPaths: []string{"clusters/a", "apps"}, Image: img},
		{Namespace: "default", Watch: []string{"default"}, GitURL: "git@github.com:org/r.git", Image: img},
		{GitURL: "https://u:$(tok)@git.example/r.git", GitBranch: "$(GIT_URL)", GitPaths: []string{"a$b", ""}, Image: img},
		{GitURL: "https://git.example/r.git", Image: img, Replicas: 3, HistoryDBSecret: "fluxd-pg"},
		{GitURL: "ssh://git@git.example/r.git", Image: img, Replicas: 1, HistoryDBSecret: "pg.db"},
		{GitURL: "https://git.example/r.git", Image: img, Replicas: 2},
		{GitURL: "https://git.example/r.git", Image: img, Watch: []string{"Apps"}},
		{GitURL: "https://git.example/r.git", Image: img, Namespace: "-x"},
		{GitURL: "https://git.example/r\n.git", Image: img},
		{GitURL: "https://git.example/r.git", Image: img, Replicas: 2, HistoryDBSecret: "Bad_Name"},
	}
	for url := range giturl.Cases {
		if url != "" {
			cases = append(cases, Options{GitURL: url, Image: img})
		}
	}
	for _, o := range cases {
		compareInstalls(t, o)
	}
}

// Seeded random options, valid and not: the chart and 'fluxctl install'
// agree on every one (FLUXD_CHART_SEED repeats a run).
func TestChartMatchesInstallRandom(t *testing.T) {
	seed := uint64(rand.Int64())
	if s := os.Getenv("FLUXD_CHART_SEED"); s != "" {
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (FLUXD_CHART_SEED=%d repeats it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed))
	pick := func(ss ...string) string { return ss[r.IntN(len(ss))] }
	names := []string{"fluxd", "apps", "default", "team-a", "web-2", "x", "a-b-c", "Bad", "-x", strings.Repeat("n", 64)}
	some := func(pool []string, n int) []string {
		var out []string
		for range r.IntN(n + 1) {
			out = append(out, pick(pool...))
		}
		return out
	}
	urls := []string{}
	for u := range giturl.Cases {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	urls = append(urls, "https://u:t$ok@h/r.git", "ssh://git@h:22/$(X).git")
	// Most random options are invalid somewhere, so draw until enough
	// rendered to compare (a fixed count failed on an unlucky seed).
	rendered, tries := 0, 0
	for ; (rendered < 20 || tries < 40) && tries < 2000; tries++ {
		o := Options{
			Namespace:   pick(append(names, "")...),
			Watch:       dedupe(some(names, 3)),
			GitURL:      pick(urls...),
			GitBranch:   pick("", "main", "prod", "$(B)", "rel/1.x"),
			GitPaths:    some([]string{"a", "clusters/prod", "$x", "deep/er/path"}, 2),
			Image:       pick("reg.example/fluxd:v1", "localhost:5000/fluxd@sha256:"+strings.Repeat("a", 64)),
			NoNamespace: r.IntN(2) == 0,
			Replicas:    r.IntN(4),
		}
		if r.IntN(3) > 0 {
			o.HistoryDBSecret = pick("fluxd-pg", "db.secret", "Bad_Name")
		}
		if o.GitURL == "" {
			o.GitURL = "https://h/r.git" // required by both (tested apart)
		}
		if compareInstalls(t, o) {
			rendered++
		}
	}
	if rendered < 20 {
		t.Errorf("only %d of %d random installs rendered: the run compares too few", rendered, tries)
	}
	t.Logf("%d of %d rendered and matched; the others both refused", rendered, tries)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// A value that is missing or wrong fails the install with every problem
// named, what to give instead, and nothing rendered.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"nothing given", nil, []string{"image is required", "make image IMAGE=", "git.url is required", "--set git.url=ssh://"}},
		{"no image", map[string]any{"git": map[string]any{"url": "https://h/r.git"}}, []string{"image is required: the fluxd image to run, e.g. --set image=registry.example.com/fluxd:v1.2.3", "kubectl -n fluxd get deployment fluxd"}},
		{"bad namespaces and replicas", map[string]any{"image": "r/f:1", "git": map[string]any{"url": "https://h/r.git"}, "watchNamespaces": []any{"Apps", "ok"}, "replicas": 2},
			[]string{`watchNamespaces: "Apps" is not a namespace name`, "replicas above 1 need historyDBSecret"}},
		{"a string for a list", map[string]any{"image": "r/f:1", "git": map[string]any{"url": "https://h/r.git"}, "watchNamespaces": "apps,web"}, []string{"watchNamespaces must be a list, e.g. --set 'watchNamespaces={a,b}'"}},
		{"a bad ClusterRole name", map[string]any{"image": "r/f:1", "git": map[string]any{"url": "https://h/r.git"}, "clusterRoleName": "Fluxd Workloads"}, []string{`clusterRoleName "Fluxd Workloads" is not a ClusterRole name`}},
		{"zero replicas", map[string]any{"image": "r/f:1", "git": map[string]any{"url": "https://h/r.git"}, "replicas": 0}, []string{"replicas must be at least 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := helmTemplate(t, "fluxd", c.values)
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// A second release in one cluster names its ClusterRole apart (Helm owns
// an object for one release only), and its bindings grant that one.
func TestChartClusterRoleName(t *testing.T) {
	out, err := helmTemplate(t, "team-b", map[string]any{"image": "r/f:1", "git": map[string]any{"url": "https://h/r.git"},
		"watchNamespaces": []any{"apps", "web"}, "clusterRoleName": "fluxd-workloads-team-b"})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	if _, ok := objs["ClusterRole/<nil>/fluxd-workloads-team-b"]; !ok {
		t.Errorf("no ClusterRole fluxd-workloads-team-b in %v", slices.Sorted(maps.Keys(objs)))
	}
	for _, ns := range []string{"apps", "web"} {
		rb, _ := objs["RoleBinding/"+ns+"/fluxd-workloads-team-b"].(map[string]any)
		if ref, _ := rb["roleRef"].(map[string]any); ref["name"] != "fluxd-workloads-team-b" {
			t.Errorf("the RoleBinding in %s grants %v, want the ClusterRole fluxd-workloads-team-b", ns, rb["roleRef"])
		}
	}
}

// The chart's notes tell what to create next, and for an SSH remote how
// to get the deploy key.
func TestChartNotes(t *testing.T) {
	ch, err := loader.Load(ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "fluxd", "gitops"
	rel, err := install.Run(ch, map[string]any{"image": "r/f:1", "git": map[string]any{"url": "git@h:org/r.git"}, "watchNamespaces": []any{"apps", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"namespace gitops, watching apps, web", "kubectl -n gitops create secret generic fluxd-tokens", "fluxctl identity"} {
		if !strings.Contains(rel.Info.Notes, w) {
			t.Errorf("the notes lack %q:\n%s", w, rel.Info.Notes)
		}
	}
}

// 'helm lint --strict' finds nothing to say about the chart (Chart.yaml,
// values, templates, rendered objects), given its required values.
func TestChartLints(t *testing.T) {
	lint := action.NewLint()
	lint.Strict, lint.Namespace = true, "fluxd"
	res := lint.Run([]string{ChartDir}, map[string]any{"image": "reg.example/fluxd:v1", "git": map[string]any{"url": "git@h:org/r.git"}})
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}
