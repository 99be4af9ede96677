package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

var policyID = platform.ID{Namespace: "flux-system", Kind: "imagepolicy", Name: "podinfo"}

// Each case is named after the Flux v2 setter rule it checks
// (image-automation-controller's "Configure image updates" guide).
func TestSetSetters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		in       string
		field    string
		from, to string
		want     string
	}{
		{"a marker on a container image sets the whole image",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\nspec:\n  template:\n    spec:\n      containers:\n      - name: podinfod\n        image: ghcr.io/stefanprodan/podinfo:5.0.0 # {\"$imagepolicy\": \"flux-system:podinfo\"}\n",
			"app.yaml:Deployment/default/podinfo:spec.template.spec.containers[0].image", "ghcr.io/stefanprodan/podinfo:5.0.0", "ghcr.io/stefanprodan/podinfo:5.0.3",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\nspec:\n  template:\n    spec:\n      containers:\n      - name: podinfod\n        image: ghcr.io/stefanprodan/podinfo:5.0.3 # {\"$imagepolicy\": \"flux-system:podinfo\"}\n"},
		{"the :tag form sets a plain field that is not an image",
			"kind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  TAG: \"5.0.0\" # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n  other: x # not a marker\n",
			"app.yaml:ConfigMap/default/cfg:data.TAG", "5.0.0", "5.0.3",
			"kind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  TAG: \"5.0.3\" # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n  other: x # not a marker\n"},
		{"the :tag form sets newTag in a kustomization's images (a number stays a string)",
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n- name: podinfo\n  newName: ghcr.io/stefanprodan/podinfo\n  newTag: 5.0.0 # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n",
			"app.yaml:Kustomization:images[0].newTag", "5.0.0", "5.1",
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n- name: podinfo\n  newName: ghcr.io/stefanprodan/podinfo\n  newTag: \"5.1\" # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n"},
		{"the :name form sets the repository of a Helm-style image block",
			"image:\n  repository: ghcr.io/old/podinfo # {\"$imagepolicy\": \"flux-system:podinfo:name\"}\n  tag: 5.0.0 # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n",
			"app.yaml:image.repository", "ghcr.io/old/podinfo", "ghcr.io/stefanprodan/podinfo",
			"image:\n  repository: ghcr.io/stefanprodan/podinfo # {\"$imagepolicy\": \"flux-system:podinfo:name\"}\n  tag: 5.0.0 # {\"$imagepolicy\": \"flux-system:podinfo:tag\"}\n"},
		{"single quotes are kept",
			"tag: '5.0.0' # {\"$imagepolicy\": \"ns:p:tag\"}\n", "app.yaml:tag", "5.0.0", "5.0.3",
			"tag: '5.0.3' # {\"$imagepolicy\": \"ns:p:tag\"}\n"},
		{"a marker in a flow mapping",
			"c: {image: a/b:1, x: y} # {\"$imagepolicy\": \"ns:p\"}\nd: {image: a/b:1 # {\"$imagepolicy\": \"ns:p\"}\n  }\n", "app.yaml:d.image", "a/b:1", "a/b:2",
			"c: {image: a/b:1, x: y} # {\"$imagepolicy\": \"ns:p\"}\nd: {image: a/b:2 # {\"$imagepolicy\": \"ns:p\"}\n  }\n"},
		{"CRLF line endings are kept",
			"a:\r\n  tag: 1.0.0 # {\"$imagepolicy\": \"ns:p:tag\"}\r\n  b: c\r\n", "app.yaml:a.tag", "1.0.0", "1.0.1",
			"a:\r\n  tag: 1.0.1 # {\"$imagepolicy\": \"ns:p:tag\"}\r\n  b: c\r\n"},
		{"an item of a sequence",
			"tags:\n- 1.0.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n- keep\n", "app.yaml:tags[0]", "1.0.0", "1.2.0",
			"tags:\n- 1.2.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n- keep\n"},
		{"the second document of a stream",
			"kind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\nv: x:1 # {\"$imagepolicy\": \"ns:p\"} \n", "app.yaml:B/default/b:v", "x:1", "x:2",
			"kind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\nv: x:2 # {\"$imagepolicy\": \"ns:p\"} \n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := SetSetters(policyID, "app.yaml", []byte(c.in), []SetterChange{{Field: c.field, From: c.from, To: c.to}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, string(out)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestSetSettersRefuses(t *testing.T) {
	t.Parallel()
	in := []byte("data:\n  TAG: 1.0.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n  plain: 1.0.0\n")
	_, err := SetSetters(policyID, "f.yaml", in, []SetterChange{{Field: "f.yaml:data.TAG", From: "0.9", To: "1.1"}})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "someone changed it") {
		t.Errorf("a field holding another value than planned: %v, want a conflict", err)
	}
	_, err = SetSetters(policyID, "f.yaml", in, []SetterChange{{Field: "f.yaml:data.plain", From: "1.0.0", To: "1.1"}})
	if !errors.Is(err, ErrNoSuchContainer) {
		t.Errorf("an unmarked field: %v, want it refused", err)
	}
}

// The markers Flux v2 writes, read as it reads them.
func TestParseSetterComment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		comment string
		policy  NSName
		form    SetterForm
		ok      bool
		err     string
	}{
		{"whole image", `# {"$imagepolicy": "flux-system:podinfo"}`, NSName{"flux-system", "podinfo"}, FormImage, true, ""},
		{"tag form", `# {"$imagepolicy": "flux-system:podinfo:tag"}`, NSName{"flux-system", "podinfo"}, FormTag, true, ""},
		{"name form", `#{"$imagepolicy":"a:b:name"}`, NSName{"a", "b"}, FormName, true, ""},
		{"digest form", `# {"$imagepolicy": "a:b:digest"}`, NSName{"a", "b"}, FormDigest, true, ""},
		{"an ordinary comment is no marker", `# pinned for now`, NSName{}, "", false, ""},
		{"another setter is no marker", `# {"$openapi": "x"}`, NSName{}, "", false, ""},
		{"a marker without a namespace is refused", `# {"$imagepolicy": "podinfo"}`, NSName{}, "", true, "NAMESPACE:POLICY"},
		{"an unknown form is refused", `# {"$imagepolicy": "a:b:sha"}`, NSName{}, "", true, ":tag, :name and :digest"},
		{"broken JSON is refused", `# {"$imagepolicy": "a:b"`, NSName{}, "", true, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, f, ok, err := ParseSetterComment(c.comment)
			if ok != c.ok || p != c.policy || f != c.form {
				t.Errorf("got %v %q %v, want %v %q %v", p, f, ok, c.policy, c.form, c.ok)
			}
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want one saying %q", err, c.err)
			}
		})
	}
}

func TestSetterValueFor(t *testing.T) {
	t.Parallel()
	img := "localhost:5000/org/app:1.2.3"
	for form, want := range map[SetterForm]string{FormImage: img, FormTag: "1.2.3", FormName: "localhost:5000/org/app"} {
		got, err := Setter{Form: form}.ValueFor(img)
		if err != nil || got != want {
			t.Errorf("form %q: %q %v, want %q", form, got, err, want)
		}
	}
	if _, err := (Setter{Form: FormDigest}).ValueFor(img); err == nil || !strings.Contains(err.Error(), "digestReflectionPolicy") {
		t.Errorf("the :digest form of an image with no digest: %v, want an error naming digestReflectionPolicy", err)
	}
	pinned := img + "@sha256:" + strings.Repeat("ab", 32)
	for form, want := range map[SetterForm]string{FormImage: pinned, FormTag: "1.2.3", FormName: "localhost:5000/org/app", FormDigest: "sha256:" + strings.Repeat("ab", 32)} {
		got, err := Setter{Form: form}.ValueFor(pinned)
		if err != nil || got != want {
			t.Errorf("form %q of %s: %q %v, want %q", form, pinned, got, err, want)
		}
	}
}

// The render check takes a marked field's change as planned, and refuses
// a commit whose marked fields changed otherwise.
func TestCheckRenderSetterFields(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: apps}\ndata:\n  TAG: \"1.0\" # {\"$imagepolicy\": \"ns:p:tag\"}\n  OTHER: \"1.0\"\n"
	writeFiles(t, root, map[string]string{"apps/cfg.yaml": cfg})
	a := &ImageAutomation{}
	a.readFile("apps/cfg.yaml", []byte(cfg))
	s := a.Setters[0]
	edited, err := SetSetters(policyID, "apps/cfg.yaml", []byte(cfg), []SetterChange{{Field: s.Field, From: "1.0", To: "1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	planned := Change{File: s.File, Line: s.ObjectLine, Field: s.ObjectPath, From: "1.0", To: "1.1"}
	check := func(content string, changes ...Change) error {
		before, after, err := Render(root, []string{filepath.Join(root, "apps")}, map[string][]byte{"apps/cfg.yaml": []byte(content)})
		if err != nil {
			t.Fatal(err)
		}
		return CheckRender(before, after, changes)
	}
	if err := check(string(edited), planned); err != nil {
		t.Errorf("the planned field change is refused: %v", err)
	}
	if err := check(strings.Replace(string(edited), `OTHER: "1.0"`, `OTHER: "2.0"`, 1), planned); !IsRenderError(err) {
		t.Errorf("an unplanned field changed too: %v, want a render error", err)
	}
	if err := check(string(edited)); !IsRenderError(err) {
		t.Errorf("the field changed with no plan: %v, want a render error", err)
	}
	stale := planned
	stale.From = "0.9"
	if err := check(string(edited), stale); !IsRenderError(err) || !strings.Contains(err.Error(), `not "0.9" as planned`) {
		t.Errorf("a plan from another value: %v, want a render error", err)
	}
}

// A $imagepolicy marker in a Secret (a document, or a List's item) is
// skipped with a warning that does not repeat the value: a marked field's
// value shows in list-services and plans, and a Secret's must not. The
// namespace of a marked field is its object's (a List item's own).
func TestSettersSkipSecretsAndKnowTheirNamespace(t *testing.T) {
	t.Parallel()
	content := `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: apps}
stringData:
  URL: https://user:hunter2@reg.example/app:1.0 # {"$imagepolicy": "flux-system:app"}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: creds2}
    stringData:
      TAG: "hunter3" # {"$imagepolicy": "flux-system:app:tag"}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: cfg, namespace: team-b}
    data:
      TAG: "1.0" # {"$imagepolicy": "flux-system:app:tag"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data:
  TAG: "1.0" # {"$imagepolicy": "flux-system:app:tag"}
`
	a := &ImageAutomation{}
	a.readFile("apps/x.yaml", []byte(content))
	var got []string
	for _, s := range a.Setters {
		got = append(got, s.Field+" in "+s.Namespace)
	}
	want := []string{"apps/x.yaml:ConfigMap/team-b/cfg:data.TAG in team-b", "apps/x.yaml:ConfigMap/default/cfg:data.TAG in default"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("setters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(a.Warnings) != 2 {
		t.Errorf("warnings %q, want one per Secret marker", a.Warnings)
	}
	for _, w := range a.Warnings {
		if strings.Contains(w, "hunter") {
			t.Errorf("a warning repeats a Secret's value: %s", w)
		}
	}
}

// fixtures reads the txtar archives in dir, each a case named after its
// file (the Flux v2 rule it checks; its comment says more).
func fixtures(t *testing.T, dir string) map[string]*txtar.Archive {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	out := map[string]*txtar.Archive{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".txtar")] = txtar.Parse(b)
	}
	return out
}

// TestSetSettersFixtures: every change of "changes" (FIELD, FROM and TO,
// tab-separated) is made to its file under in/, which must then read as
// the file under want/, byte for byte.
func TestSetSettersFixtures(t *testing.T) {
	t.Parallel()
	for name, a := range fixtures(t, "setters") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := txtarFiles(a)
			byFile := map[string][]SetterChange{}
			for _, line := range strings.Split(strings.TrimSpace(files["changes"]), "\n") {
				f := strings.Split(line, "\t")
				if len(f) != 3 {
					t.Fatalf("changes: %q is not FIELD\\tFROM\\tTO", line)
				}
				file, _, _ := strings.Cut(f[0], ":")
				byFile[file] = append(byFile[file], SetterChange{Field: f[0], From: f[1], To: f[2]})
			}
			for file, changes := range byFile {
				out, err := SetSetters(platform.ID{Namespace: "ns", Kind: "imagepolicy", Name: "p"}, file, []byte(files["in/"+file]), changes)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(files["want/"+file], string(out)); diff != "" {
					t.Errorf("%s (-want +got)\n%s", file, diff)
				}
			}
		})
	}
}

// txtarFiles is an archive's files by name.
func txtarFiles(a *txtar.Archive) map[string]string {
	out := make(map[string]string, len(a.Files))
	for _, f := range a.Files {
		out[f.Name] = string(f.Data)
	}
	return out
}
