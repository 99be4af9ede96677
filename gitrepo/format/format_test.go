package format_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/platform"
)

// fluxObjects are a Flux v2 ImageRepository, ImagePolicy and
// ImageUpdateAutomation for reg/app, covering ./.
const fluxObjects = `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: app, namespace: flux-system}
spec: {image: reg/app}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: app, namespace: flux-system}
spec:
  imageRepositoryRef: {name: app}
  policy: {semver: {range: ">=1.0.0"}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {name: auto, namespace: flux-system}
spec:
  update: {path: ./}
`

// deployment is a Deployment app running image, with a comment in
// non-ASCII text (kept byte for byte by every edit) and line, the image
// field's own comment.
func deployment(image, line string) string {
	return "# Déploiement « app » — 日本語のコメント\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app # ünïcode\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + image + line + "\n"
}

// contract is one format's fixture for the contract every Handler keeps.
type contract struct {
	name   string
	format gitrepo.Format
	// files is the repository; service the definition to release, with
	// its container (the first one when "").
	files   map[string]string
	service platform.ID
	// file is the file the edit writes; from and to the bytes of the
	// value it replaces there (nothing else in the file changes).
	file, from, to string
	// image is the container's image as fluxd reads it, and target the
	// one released.
	image, target string
	// moves are the workloads the change applies.
	moves []platform.ID
	// built is whether a kustomization builds the definition.
	built bool
	// places are the files and namespaces its release touches besides
	// its own.
	places []gitrepo.Place
}

var app = platform.ID{Namespace: "apps", Kind: "deployment", Name: "app"}

var contracts = []contract{
	{
		name:    "plain",
		format:  gitrepo.FormatPlain,
		files:   map[string]string{"apps/app.yaml": deployment("reg/app:1.0.0", " # 古い")},
		service: app,
		file:    "apps/app.yaml", from: "image: reg/app:1.0.0 # 古い", to: "image: reg/app:1.2.0 # 古い",
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves: []platform.ID{app},
	},
	{
		name:   "kustomize",
		built:  true,
		format: gitrepo.FormatKustomize,
		files: map[string]string{
			"apps/kustomization.yaml": "# Überlagerung — ça marche\nresources: [app.yaml]\nimages:\n- name: reg/app\n  newTag: 1.0.0 # étiquette\n",
			"apps/app.yaml":           deployment("reg/app:0.0.1", ""),
		},
		service: app,
		file:    "apps/kustomization.yaml", from: "newTag: 1.0.0 # étiquette", to: "newTag: 1.2.0 # étiquette",
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves: []platform.ID{app},
	},
	{
		name:   "setters",
		format: gitrepo.FormatSetters,
		files: map[string]string{
			"flux/objects.yaml": fluxObjects,
			"apps/app.yaml":     deployment("reg/app:1.0.0", ` # {"$imagepolicy": "flux-system:app"}`),
		},
		service: platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "app"},
		file:    "apps/app.yaml", from: `image: reg/app:1.0.0 # {"$imagepolicy": "flux-system:app"}`, to: `image: reg/app:1.2.0 # {"$imagepolicy": "flux-system:app"}`,
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves:  []platform.ID{app},
		places: []gitrepo.Place{{Namespace: "flux-system", File: "apps/app.yaml"}, {Namespace: "apps", File: "apps/app.yaml"}},
	},
	{
		// A marker on a base's object: it moves the object each build
		// makes of it, named as that build names it, and nothing whose
		// name merely contains it.
		name:   "setters in a base",
		format: gitrepo.FormatSetters,
		files: map[string]string{
			"flux/objects.yaml":            fluxObjects,
			"apps/base/kustomization.yaml": "resources: [app.yaml]\n",
			"apps/base/app.yaml":           deployment("reg/app:1.0.0", ` # {"$imagepolicy": "flux-system:app"}`),
			"apps/prod/kustomization.yaml": "# Produktion — ça\nnamePrefix: prod-\nresources: [../base, sidecar.yaml]\n",
			"apps/prod/sidecar.yaml":       strings.Replace(deployment("reg/app:1.0.0", ""), "name: app # ünïcode", "name: app-sidecar", 1),
		},
		service: platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "app"},
		file:    "apps/base/app.yaml", from: `image: reg/app:1.0.0 # {"$imagepolicy": "flux-system:app"}`, to: `image: reg/app:1.2.0 # {"$imagepolicy": "flux-system:app"}`,
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves:  []platform.ID{app, {Namespace: "apps", Kind: "deployment", Name: "prod-app"}},
		places: []gitrepo.Place{{Namespace: "flux-system", File: "apps/base/app.yaml"}, {Namespace: "apps", File: "apps/base/app.yaml"}},
	},
	{
		name:   "helm",
		format: gitrepo.FormatHelm,
		files: map[string]string{
			"apps/hr.yaml": "# Versión — ñandú\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr # ünïcode\n  namespace: apps\nspec:\n  chart: {spec: {chart: app}}\n  targetNamespace: web\n  values:\n    image:\n      repository: reg/app # リポジトリ\n      tag: 1.0.0 # タグ\n",
		},
		service: platform.ID{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "hr"},
		file:    "apps/hr.yaml", from: "tag: 1.0.0 # タグ", to: "tag: 1.2.0 # タグ",
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves:  []platform.ID{{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "hr"}},
		places: []gitrepo.Place{{Namespace: "web", File: "apps/hr.yaml"}},
	},
	{
		name:   "helm built by a kustomization",
		built:  true,
		format: gitrepo.FormatHelm,
		files: map[string]string{
			"apps/kustomization.yaml": "resources: [hr.yaml]\n",
			"apps/hr.yaml":            "# Versión — ñandú\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr # ünïcode\n  namespace: apps\nspec:\n  chart: {spec: {chart: app}}\n  targetNamespace: web\n  values:\n    image:\n      repository: reg/app # リポジトリ\n      tag: 1.0.0 # タグ\n",
		},
		service: platform.ID{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "hr"},
		file:    "apps/hr.yaml", from: "tag: 1.0.0 # タグ", to: "tag: 1.2.0 # タグ",
		image: "reg/app:1.0.0", target: "reg/app:1.2.0",
		moves:  []platform.ID{{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "hr"}},
		places: []gitrepo.Place{{Namespace: "web", File: "apps/kustomization.yaml"}},
	},
}

// TestEveryFormatKeepsTheContract runs the contract of format.Handler over
// every format, as history/storetest runs over both stores: the fixture
// is read with its format; an edit changes only the bytes of the value
// (comments and non-ASCII text kept); an edit whose From is not what
// git holds is refused with a *gitrepo.ConflictError and writes nothing;
// the change moves the workloads it should; and the render of the edited
// repository differs from the parent's by exactly the handler's Changes.
func TestEveryFormatKeepsTheContract(t *testing.T) {
	covered := map[gitrepo.Format]bool{}
	for _, c := range contracts {
		covered[c.format] = true
	}
	for _, h := range format.All() {
		if !covered[h.Format()] {
			t.Errorf("format %s has no contract case", h.Format())
		}
		if format.For(h.Format()) != h {
			t.Errorf("format.For(%s) is not its handler", h.Format())
		}
	}
	for _, c := range contracts {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for f, content := range c.files {
				p := filepath.Join(root, filepath.FromSlash(f))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := gitrepo.FindWorkloads(root, []string{root})
			if err != nil {
				t.Fatal(err)
			}
			def, ok := m.Workloads[c.service]
			if !ok {
				t.Fatalf("%s is not read from the fixture (read %v; problems %v)", c.service, slices.Collect(maps.Keys(m.Workloads)), m.Problems)
			}
			// Read: the definition carries its format, and its handler
			// is that format's.
			if def.Format != c.format || def.Built != c.built {
				t.Fatalf("%s is read as format %q (built %v), want %q (built %v)", c.service, def.Format, def.Built, c.format, c.built)
			}
			h := format.Of(def)
			if h.Format() != c.format {
				t.Fatalf("format.Of(%s) is %s's handler, want %s's", c.service, h.Format(), c.format)
			}
			if len(def.Containers) == 0 || def.Containers[0].Image != c.image {
				t.Fatalf("%s's containers are %+v, want one running %s", c.service, def.Containers, c.image)
			}
			container := def.Containers[0].Name
			before := c.files[c.file]

			// Compare-and-swap: a stale From is refused, and nothing is
			// written.
			files := map[string][]byte{}
			stale := []gitrepo.ImageUpdate{{Container: container, From: "reg/app:0.9.9", To: c.target}}
			err = h.Edit(root, def, stale, files)
			var conflict *gitrepo.ConflictError
			if !errors.As(err, &conflict) || !errors.Is(err, gitrepo.ErrConflict) {
				t.Errorf("an edit expecting reg/app:0.9.9 where git holds %s: err = %v, want a *gitrepo.ConflictError", c.image, err)
			}
			if len(files) != 0 {
				t.Errorf("a refused edit wrote %v", slices.Collect(maps.Keys(files)))
			}

			// The edit: only the value's bytes change.
			updates := []gitrepo.ImageUpdate{{Container: container, From: c.image, To: c.target}}
			if err := h.Edit(root, def, updates, files); err != nil {
				t.Fatalf("edit: %v", err)
			}
			if !strings.Contains(before, c.from) {
				t.Fatalf("the fixture's %s has no %q", c.file, c.from)
			}
			want := strings.Replace(before, c.from, c.to, 1)
			if got := string(files[c.file]); got != want {
				t.Errorf("the edited %s is\n%s\nwant (only the value changed, comments and non-ASCII text kept)\n%s", c.file, got, want)
			}
			if len(files) != 1 {
				t.Errorf("the edit wrote %v, want only %s", slices.Collect(maps.Keys(files)), c.file)
			}

			// What the change applies.
			if got := h.Moves(def, updates, m); !slices.Equal(got, c.moves) {
				t.Errorf("the change moves %v, want %v", got, c.moves)
			}

			// Where else it reaches, for scopes.
			if got := h.Places(def); !slices.Equal(got, c.places) {
				t.Errorf("its release touches %v besides its own file and namespace, want %v", got, c.places)
			}

			// What it renders: the render check passes with the
			// handler's changes, and refuses the commit without them.
			bef, aft, err := gitrepo.Render(root, []string{root}, files)
			if err != nil {
				t.Fatal(err)
			}
			changes := h.Changes(def, updates, m)
			if err := gitrepo.CheckRender(bef, aft, changes); err != nil {
				t.Errorf("the render check refuses the handler's own edit with its changes %v: %v", changes, err)
			}
			if err := gitrepo.CheckRender(bef, aft, nil); !gitrepo.IsRenderError(err) {
				t.Errorf("the render check passes the edit with no changes planned (err = %v): the contract case does not move anything", err)
			}

			// Where its policy is written.
			if file, _, err := h.Annotated(root, def); c.format == gitrepo.FormatKustomize {
				if err == nil {
					t.Errorf("a built workload's annotations are written in %s; fluxd cannot pick the base or patch for them", file)
				}
			} else if err != nil || file == "" {
				t.Errorf("Annotated = %q, %v; want the file its object is in", file, err)
			}
		})
	}
}
