package torture

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	kgDeploy = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: g
  annotations:
    fluxd.io/automated: "true"
spec:
  template:
    spec:
      containers:
        - name: app
          image: reg:5000/rg
`
	kgKustomization = `resources: [deployment.yaml]
images:
  - name: reg:5000/rg
    newTag: 1.0.3 # a release edits this value
`
	khDeploy = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: h
spec:
  template:
    spec:
      containers:
        - name: app
          image: r/h:1.0.0 # {"$imagepolicy": "flux-system:h"}
`
	khPolicy = `apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {name: h, namespace: flux-system}
spec: {image: r/h}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {name: h, namespace: flux-system}
spec:
  imageRepositoryRef: {name: h}
`
)

// The model builds a kustomization itself: the workload a directory
// builds runs the image its images: entry sets, and its resource file is
// not read as it is besides.
func TestParseKustomizeImages(t *testing.T) {
	ws, err := ParseWorkloads(map[string][]byte{"t/g/kustomization.yaml": []byte(kgKustomization), "t/g/deployment.yaml": []byte(kgDeploy), "t/a.yaml": []byte(strings.ReplaceAll(kgDeploy, "name: g", "name: a"))})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Workload{
		"default:deployment/g": {Images: map[string]string{"app": "reg:5000/rg:1.0.3"}, Annotations: map[string]string{"fluxd.io/automated": "true"}},
		"default:deployment/a": {Images: map[string]string{"app": "reg:5000/rg"}, Annotations: map[string]string{"fluxd.io/automated": "true"}},
	}
	if d := cmp.Diff(want, ws); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for img, want := range map[string][3]string{
		"reg:5000/x:1.0@sha256:ab": {"reg:5000/x", "1.0", "sha256:ab"},
		"reg:5000/x":               {"reg:5000/x", "", ""},
		"x:1":                      {"x", "1", ""},
	} {
		if n, tag, d := splitImage(img); [3]string{n, tag, d} != want {
			t.Errorf("splitImage(%q) = %q %q %q", img, n, tag, d)
		}
	}
	if _, err := ParseWorkloads(map[string][]byte{"t/g/kustomization.yaml": []byte("resources: [gone.yaml]\n")}); err == nil {
		t.Error("a kustomization naming a resource that is not there: no error")
	}
}

// A marker in a base moves the base's own build and the overlay's: the
// field is named by the base's file; both builds hold it (a lock on the
// base's Deployment locks the policy); both builds' containers are the
// policy's, not counted as their own.
func TestParseMarkerInABase(t *testing.T) {
	files := func(deploy string) map[string]Workload {
		ws, err := ParseWorkloads(map[string][]byte{
			"t/h/base/kustomization.yaml":    []byte("resources: [deployment.yaml]\n"),
			"t/h/base/deployment.yaml":       []byte(deploy),
			"t/h/overlay/kustomization.yaml": []byte("nameSuffix: -o\nresources: [../base]\n"),
			"t/h-automation.yaml":            []byte(khPolicy),
		})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ws := files(khDeploy)
	field := "t/h/base/deployment.yaml:Deployment/default/h:spec.template.spec.containers[0].image"
	pol := ws["flux-system:imagepolicy/h"]
	if d := cmp.Diff(map[string]string{field: "r/h:1.0.0"}, pol.Images); d != "" {
		t.Errorf("the policy's fields: (-want +got)\n%s", d)
	}
	if d := cmp.Diff([]string{"default:deployment/h", "default:deployment/h-o"}, pol.Holders); d != "" {
		t.Errorf("holders: (-want +got)\n%s", d)
	}
	for _, id := range pol.Holders {
		if w := ws[id]; w.Images["app"] != "r/h:1.0.0" || !w.Marked["app"] {
			t.Errorf("%s: %+v", id, w)
		}
	}
	after := files(SetLocked(SetMarked(strings.Replace(khDeploy, "metadata:\n  name: h\n", "metadata:\n  name: h\n  annotations:\n    x: y\n", 1), "r/h:1.0.1"), true))
	ups, _ := Diff(ws, after)
	if d := cmp.Diff([]Update{{"flux-system:imagepolicy/h", field, "r/h:1.0.0", "r/h:1.0.1"}}, ups); d != "" {
		t.Errorf("a hotfix of the base: (-want +got)\n%s", d)
	}
	if locked, why := LockedIn(after, "flux-system:imagepolicy/h"); !locked || !strings.Contains(why, "default:deployment/h") {
		t.Errorf("a lock on the base's Deployment: LockedIn %v %q", locked, why)
	}
}

// A marker in a kind: List's item is named by the item, and the item is
// a Deployment of its own that holds the field.
func TestParseMarkerInAListItem(t *testing.T) {
	list := "apiVersion: v1\nkind: List\nitems:\n  - " + strings.TrimPrefix(strings.ReplaceAll(khDeploy, "\n", "\n    "), "    ")
	ws, err := ParseWorkloads(map[string][]byte{"t/i.yaml": []byte(list), "t/h-automation.yaml": []byte(khPolicy)})
	if err != nil {
		t.Fatal(err)
	}
	field := "t/i.yaml:Deployment/default/h:spec.template.spec.containers[0].image"
	pol := ws["flux-system:imagepolicy/h"]
	if d := cmp.Diff(map[string]string{field: "r/h:1.0.0"}, pol.Images); d != "" {
		t.Errorf("the policy's fields: (-want +got)\n%s\n%s", d, list)
	}
	if d := cmp.Diff([]string{"default:deployment/h"}, pol.Holders); d != "" {
		t.Errorf("holders: (-want +got)\n%s", d)
	}
	if want := `              image: … # {"$imagepolicy": "flux-system:h"}`; pol.Kept[field] != want {
		t.Errorf("kept %q, want %q", pol.Kept[field], want)
	}
	if w := ws["default:deployment/h"]; !w.Marked["app"] {
		t.Errorf("the item's Deployment: %+v", w)
	}
}
