package torture

import (
	"strings"
	"testing"
)

func TestPersonEdits(t *testing.T) {
	y := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    owner: team
spec:
  template:
    spec:
      containers:
        - name: app
          image: r/web:1.0.0
`
	locked := SetLocked(SetImage(y, "r/web:1.0.1-hotfix"), true)
	ws, err := ParseWorkloads(map[string][]byte{"web.yaml": []byte(locked)})
	if err != nil {
		t.Fatal(err)
	}
	w := ws[web]
	if !w.Locked() || w.Images["app"] != "r/web:1.0.1-hotfix" || w.Annotations["owner"] != "team" {
		t.Errorf("after a hotfix and a lock: %+v\n%s", w, locked)
	}
	if again := SetLocked(locked, true); again != locked {
		t.Errorf("locking twice changed the file:\n%s", again)
	}
	ws, _ = ParseWorkloads(map[string][]byte{"web.yaml": []byte(SetLocked(locked, false))})
	if ws[web].Locked() || ws[web].Annotations["owner"] != "team" {
		t.Errorf("after the unlock: %+v", ws[web])
	}
}

// A person's hotfix of a kustomized service sets its images: entry's
// newTag, quotes and comment kept, and the build runs it.
func TestSetNewTag(t *testing.T) {
	k := SetNewTag(`resources:
  - deployment.yaml
images:
  - name: reg:5000/rg
    newTag: "1.0.0" # a release edits this value
`, "1.0.1-hotfix.2")
	if want := `    newTag: "1.0.1-hotfix.2" # a release edits this value`; !strings.Contains(k, want) {
		t.Fatalf("got\n%s\nwant a line %q", k, want)
	}
	ws, err := ParseWorkloads(map[string][]byte{"t/g/kustomization.yaml": []byte(k), "t/g/deployment.yaml": []byte(kgDeploy)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ws["default:deployment/g"].Images["app"]; got != "reg:5000/rg:1.0.1-hotfix.2" {
		t.Errorf("the build runs %q", got)
	}
}
