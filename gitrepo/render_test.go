package gitrepo

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
)

var renderSeed = flag.Int64("render-seed", 0, "seed of TestCheckRenderRandomized (0: a fresh one, printed)")

func deploy(name, image string, replicas int) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\nspec:\n  replicas: %d\n  selector:\n    matchLabels: {app: %s}\n  template:\n    metadata:\n      labels: {app: %s}\n    spec:\n      containers:\n        - name: app\n          image: %s\n", name, replicas, name, name, image)
}

func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for f, b := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// renderDirs are the manifest paths of the test repositories: plain
// files under apps/, a kustomization in k/prod over k/base.
var renderDirs = []string{"apps", "k/prod"}

func renderPair(t testing.TB, root string, overlay map[string][]byte) (*Objects, *Objects) {
	t.Helper()
	var dirs []string
	for _, d := range renderDirs {
		if _, err := os.Stat(filepath.Join(root, d)); err == nil {
			dirs = append(dirs, filepath.Join(root, d))
		}
	}
	before, after, err := Render(root, dirs, overlay)
	if err != nil {
		t.Fatal(err)
	}
	return before, after
}

func dep(name string) platform.ID {
	return platform.ID{Namespace: "default", Kind: "deployment", Name: name}
}

func TestCheckRender(t *testing.T) {
	t.Parallel()
	anchors := "apiVersion: apps/v1\nkind: DeploymentList\nitems:\n" +
		"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a}\n  spec:\n    template:\n      spec:\n        containers:\n        - name: app\n          image: &img reg/web:1.0.0\n" +
		"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: b}\n  spec:\n    template:\n      spec:\n        containers:\n        - name: app\n          image: *img\n"
	kust := map[string]string{
		"k/base/kustomization.yaml": "resources: [kweb.yaml, kapi.yaml]\n",
		"k/base/kweb.yaml":          deploy("kweb", "reg/web:1.0.0", 1),
		"k/base/kapi.yaml":          deploy("kapi", "reg/web:1.0.0", 1),
		"k/prod/kustomization.yaml": "resources: [../base]\n",
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		overlay map[string]string
		changes []Change
		moved   []string // nil: accepted
	}{{
		name:    "an unlock that leaves an empty annotations mapping",
		files:   map[string]string{"apps/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    fluxd.io/locked: \"true\"\n"},
		overlay: map[string]string{"apps/web.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n  annotations: {}\n"},
		changes: []Change{{Workload: dep("web"), Annotation: "fluxd.io/locked", From: "true", To: ""}},
	}, {
		name:    "the planned image, nothing else",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2), "apps/api.yaml": deploy("api", "reg/api:1", 1)},
		overlay: map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.1.0", 2)},
		changes: []Change{{Workload: dep("web"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
	}, {
		name:    "the planned image and the replicas",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2)},
		overlay: map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.1.0", 3)},
		changes: []Change{{Workload: dep("web"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/web"},
	}, {
		name:    "another workload moved",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2), "apps/api.yaml": deploy("api", "reg/api:1", 1)},
		overlay: map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.1.0", 2), "apps/api.yaml": deploy("api", "reg/api:2", 1)},
		changes: []Change{{Workload: dep("web"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/api"},
	}, {
		name:    "a planned change missing",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2)},
		overlay: map[string]string{},
		changes: []Change{{Workload: dep("web"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/web"},
	}, {
		name:    "git holds another image than planned (a hotfix)",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.1-hotfix", 2)},
		overlay: map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.1.0", 2)},
		changes: []Change{{Workload: dep("web"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/web"},
	}, {
		name:    "an anchor shared by two workloads",
		files:   map[string]string{"apps/list.yaml": anchors},
		overlay: map[string]string{"apps/list.yaml": strings.Replace(anchors, "&img reg/web:1.0.0", "&img reg/web:1.1.0", 1)},
		changes: []Change{{Workload: dep("a"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/b"},
	}, {
		name:    "a kustomize images: entry moves a sibling",
		files:   kust,
		overlay: map[string]string{"k/prod/kustomization.yaml": "resources: [../base]\nimages:\n- name: reg/web\n  newTag: 1.1.0\n"},
		changes: []Change{{Workload: dep("kweb"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}},
		moved:   []string{"Deployment/default/kapi"},
	}, {
		name:    "a kustomize images: entry for both siblings, both planned",
		files:   kust,
		overlay: map[string]string{"k/prod/kustomization.yaml": "resources: [../base]\nimages:\n- name: reg/web\n  newTag: 1.1.0\n"},
		changes: []Change{
			{Workload: dep("kweb"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"},
			{Workload: dep("kapi"), Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"},
		},
	}, {
		name:    "an annotation",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2)},
		overlay: map[string]string{"apps/web.yaml": strings.Replace(deploy("web", "reg/web:1.0.0", 2), "  name: web\n", "  name: web\n  annotations:\n    fluxd.io/locked: \"true\"\n", 1)},
		changes: []Change{{Workload: dep("web"), Annotation: "fluxd.io/locked", From: "", To: "true"}},
	}, {
		name:    "a workload that would no longer render",
		files:   map[string]string{"apps/web.yaml": deploy("web", "reg/web:1.0.0", 2)},
		overlay: map[string]string{"apps/web.yaml": "kind: ConfigMap\n"},
		moved:   []string{"Deployment/default/web"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			overlay := map[string][]byte{}
			for f, b := range tc.overlay {
				overlay[f] = []byte(b)
			}
			// The kustomization is read where it is; the base files
			// are not walked on their own.
			before, after := renderPair(t, root, overlay)
			err := CheckRender(before, after, tc.changes)
			if tc.moved == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("accepted (%v); want refused naming %v", err, tc.moved)
			}
			if strings.Join(re.Moved, " ") != strings.Join(tc.moved, " ") {
				t.Errorf("refused naming %v; want %v\n%v", re.Moved, tc.moved, err)
			}
		})
	}
}

// TestCheckRenderRandomized builds random repositories (plain files,
// typed lists with anchors shared between items, images shared between
// workloads, kustomizations whose images: entries siblings share), makes
// a random release edit with fluxd's own editors, sometimes with a random
// unplanned edit on top, and checks CheckRender against an oracle that
// reads both trees with FindWorkloads: accepted exactly when the only
// differences are the planned ones, and when refused, naming every
// workload that moved unplanned.
func TestCheckRenderRandomized(t *testing.T) {
	seed := *renderSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -render-seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	runs := 60
	if testing.Short() {
		runs = 15
	}
	accepted, refused := 0, 0
	for run := 0; run < runs; run++ {
		files := randomRepo(rng)
		root := t.TempDir()
		writeFiles(t, root, files)
		var dirs []string
		for _, d := range renderDirs {
			if _, err := os.Stat(filepath.Join(root, d)); err == nil {
				dirs = append(dirs, filepath.Join(root, d))
			}
		}
		m, err := FindWorkloads(root, dirs)
		if err != nil || len(m.Workloads) == 0 {
			t.Fatalf("run %d: %v %v", run, err, m)
		}
		ids := sortedIDs(m.Workloads)
		id := ids[rng.Intn(len(ids))]
		def := m.Workloads[id]
		if len(def.Containers) == 0 {
			continue // its image is an alias, which fluxd does not edit
		}
		c := def.Containers[rng.Intn(len(def.Containers))]
		repo, _ := splitImage(c.Image)
		to := fmt.Sprintf("%s:9.%d", repo, rng.Intn(3))
		if to == c.Image {
			continue
		}
		content := []byte(files[def.File])
		var out []byte
		if def.Built {
			current := map[string]string{}
			for _, c := range def.Containers {
				current[c.Name] = c.Image
			}
			out, err = SetKustomizeImages(root, def.File, content, id, current, map[string]string{c.Name: to})
		} else {
			out, err = SetImages(content, id, map[string]ImageChange{c.Name: {From: c.Image, To: to}})
		}
		if err != nil {
			continue // an edit the editor refuses on its own
		}
		overlay := map[string][]byte{def.File: out}
		if rng.Intn(2) == 0 {
			// An unplanned edit on top: replicas somewhere, or an image.
			names := sortedKeys(files)
			f := names[rng.Intn(len(names))]
			b, ok := overlay[f]
			if !ok {
				b = []byte(files[f])
			}
			switch rng.Intn(2) {
			case 0:
				b = []byte(strings.Replace(string(b), "replicas: 1\n", "replicas: 4\n", 1))
			default:
				b = []byte(strings.Replace(string(b), ":1.0.0", ":1.0.1", 1))
			}
			overlay[f] = b
		}
		planned := Change{Workload: id, Container: c.Name, From: c.Image, To: to}
		unplanned := oracle(t, root, files, overlay, planned)
		before, after := renderPair(t, root, overlay)
		err = CheckRender(before, after, []Change{planned})
		var re *RenderError
		switch {
		case len(unplanned) == 0 && err != nil:
			t.Fatalf("run %d (seed %d): refused %s although only it changed: %v\nfiles: %v", run, seed, planned, err, overlay)
		case len(unplanned) > 0 && !errors.As(err, &re):
			t.Fatalf("run %d (seed %d): accepted %s although %v moved too (%v)", run, seed, planned, unplanned, err)
		case len(unplanned) > 0:
			for _, u := range unplanned {
				if !strings.Contains(strings.Join(re.Moved, " "), u) {
					t.Fatalf("run %d (seed %d): refused naming %v; %s moved too\n%v", run, seed, re.Moved, u, err)
				}
			}
			refused++
		default:
			accepted++
		}
	}
	t.Logf("%d edits accepted, %d refused", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Errorf("the random runs did not cover both outcomes (%d accepted, %d refused)", accepted, refused)
	}
}

// oracle reads the tree before and after the overlay with FindWorkloads
// and returns the workloads ("Deployment/default/x") whose images or
// replicas differ other than by planned.
func oracle(t *testing.T, root string, files map[string]string, overlay map[string][]byte, planned Change) []string {
	t.Helper()
	after := t.TempDir()
	writeFiles(t, after, files)
	for f, b := range overlay {
		writeFiles(t, after, map[string]string{f: string(b)})
	}
	read := func(dir string) map[platform.ID]string {
		var dirs []string
		for _, d := range renderDirs {
			if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
				dirs = append(dirs, filepath.Join(dir, d))
			}
		}
		m, err := FindWorkloads(dir, dirs)
		if err != nil {
			t.Fatal(err)
		}
		out := map[platform.ID]string{}
		for id, d := range m.Workloads {
			var parts []string
			for _, c := range d.Containers {
				img := c.Image
				if id == planned.Workload && c.Name == planned.Container && dir == root {
					if img != planned.From {
						img = "mismatch:" + img
					} else {
						img = planned.To
					}
				}
				parts = append(parts, c.Name+"="+img)
			}
			if d.Replicas != nil {
				parts = append(parts, fmt.Sprintf("replicas=%d", *d.Replicas))
			}
			out[id] = strings.Join(parts, " ")
		}
		return out
	}
	want, got := read(root), read(after)
	var moved []string
	for id, w := range want {
		if got[id] != w {
			moved = append(moved, "Deployment/"+id.Namespace+"/"+id.Name)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			moved = append(moved, "Deployment/"+id.Namespace+"/"+id.Name)
		}
	}
	sort.Strings(moved)
	return moved
}

// randomRepo is a repository of a few files: plain Deployments, typed
// lists whose items may share an image through an anchor, and a
// kustomization over a base whose workloads may share a repository.
func randomRepo(rng *rand.Rand) map[string]string {
	files := map[string]string{}
	repos := []string{"reg/web", "reg/api", "reg/shared"}
	img := func() string { return repos[rng.Intn(len(repos))] + ":1.0.0" }
	n := 0
	name := func() string { n++; return fmt.Sprintf("w%d", n) }
	for i := 0; i < 1+rng.Intn(3); i++ {
		files[fmt.Sprintf("apps/plain%d.yaml", i)] = deploy(name(), img(), 1+rng.Intn(2))
	}
	if rng.Intn(2) == 0 {
		a, b := name(), name()
		alias := "*img"
		if rng.Intn(2) == 0 {
			alias = img()
		}
		files["apps/list.yaml"] = "apiVersion: apps/v1\nkind: DeploymentList\nitems:\n" +
			"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: " + a + "}\n  spec:\n    replicas: 1\n    template:\n      spec:\n        containers:\n        - name: app\n          image: &img " + img() + "\n" +
			"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: " + b + "}\n  spec:\n    template:\n      spec:\n        containers:\n        - name: app\n          image: " + alias + "\n"
	}
	if rng.Intn(2) == 0 {
		var res []string
		for i := 0; i < 1+rng.Intn(3); i++ {
			nm := name()
			files["k/base/"+nm+".yaml"] = deploy(nm, img(), 1)
			res = append(res, nm+".yaml")
		}
		files["k/base/kustomization.yaml"] = "resources: [" + strings.Join(res, ", ") + "]\n"
		kust := "resources: [../base]\n"
		if rng.Intn(2) == 0 {
			kust += "images:\n- name: reg/shared\n  newTag: 1.0.0\n"
		}
		files["k/prod/kustomization.yaml"] = kust
	}
	return files
}
