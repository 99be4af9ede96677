package torture

import "testing"

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
