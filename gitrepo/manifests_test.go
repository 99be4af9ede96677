package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/google/go-cmp/cmp"
)

const multiDoc = `# The back end.
apiVersion: v1
kind: Service
metadata:
  name: redis
spec:
  selector: {app: redis}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: redis   # the cache
  namespace: prod
spec:
  template:
    spec:
      containers:
        - name: redis
          image: "reg.example/redis:7.0.0"    # pinned
        - image: 'reg.example/exporter:1.0'
          name: exporter
---
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: backup, namespace: prod}
  spec:
    jobTemplate:
      spec:
        template:
          spec:
            initContainers:
            - {name: prep, image: reg.example/prep:1}
            containers:
            - name: backup
              image: reg.example/backup:2.0
`

var redis = platform.ID{Namespace: "prod", Kind: "deployment", Name: "redis"}

func TestParseFile(t *testing.T) {
	t.Parallel()
	defs, err := ParseFile("deploy/backend.yaml", []byte(multiDoc))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID         string
		Line       int
		Containers []Container
	}
	var got []row
	for _, d := range defs {
		got = append(got, row{d.ID.String(), d.Line, d.Containers})
	}
	want := []row{
		{"prod:deployment/redis", 9, []Container{{Name: "redis", Image: "reg.example/redis:7.0.0"}, {Name: "exporter", Image: "reg.example/exporter:1.0"}}},
		{"prod:cronjob/backup", 26, []Container{{Name: "prep", Image: "reg.example/prep:1", Init: true}, {Name: "backup", Image: "reg.example/backup:2.0"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseFile (-want +got):\n%s", diff)
	}
}

func TestSetImagesChangesOnlyTheValues(t *testing.T) {
	t.Parallel()
	out, err := SetImages([]byte(multiDoc), redis, planned([]byte(multiDoc), redis, map[string]string{"redis": "reg.example/redis:7.2.0", "exporter": "reg.example/exporter:1.1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(multiDoc, `"reg.example/redis:7.0.0"`, `"reg.example/redis:7.2.0"`, 1)
	want = strings.Replace(want, `'reg.example/exporter:1.0'`, `'reg.example/exporter:1.1'`, 1)
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("SetImages (-want +got):\n%s", diff)
	}
	backup := platform.ID{Namespace: "prod", Kind: "cronjob", Name: "backup"}
	out, err = SetImages([]byte(multiDoc), backup, planned([]byte(multiDoc), backup, map[string]string{"prep": "reg.example/prep:2"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(multiDoc, "reg.example/prep:1}", "reg.example/prep:2}", 1); string(out) != want {
		t.Errorf("flow-style edit:\n%s", cmp.Diff(want, string(out)))
	}
}

func TestSetImagesErrors(t *testing.T) {
	t.Parallel()
	_, err := SetImages([]byte(multiDoc), redis, planned([]byte(multiDoc), redis, map[string]string{"nope": "x"}))
	if !errors.Is(err, ErrNoSuchContainer) {
		t.Errorf("unknown container: %v", err)
	}
	_, err = SetImages([]byte(multiDoc), platform.ID{Namespace: "prod", Kind: "deployment", Name: "other"}, planned([]byte(multiDoc), platform.ID{Namespace: "prod", Kind: "deployment", Name: "other"}, map[string]string{"redis": "x"}))
	if !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("unknown workload: %v", err)
	}
	_, err = SetImages([]byte(multiDoc), redis, planned([]byte(multiDoc), redis, map[string]string{"redis": "reg/\xff"}))
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	twice := "kind: Deployment\nmetadata: {name: a}\n---\nkind: Deployment\nmetadata: {name: a}\n"
	var dup *DuplicateError
	_, err = SetImages([]byte(twice), platform.ID{Namespace: "default", Kind: "deployment", Name: "a"}, nil)
	if !errors.As(err, &dup) {
		t.Errorf("defined twice: %v", err)
	}
}

func TestFindWorkloads(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("deploy/backend.yaml", multiDoc)
	write("deploy/app.yml", "kind: Deployment\nmetadata: {name: app}\nspec: {template: {spec: {containers: [{name: app, image: reg/app:1}]}}}\n")
	write("deploy/broken.yaml", "kind: Deployment\nmetadata:\n  name: [unclosed\n")
	write("deploy/dup-a.yaml", "kind: Deployment\nmetadata: {name: twice}\n")
	write("deploy/sub/dup-b.yaml", "kind: Deployment\nmetadata: {name: twice}\n")
	write("deploy/README.md", "kind: Deployment\n")
	write("other/ignored.yaml", "kind: Deployment\nmetadata: {name: elsewhere}\n")

	dirs, err := ResolvePaths(root, []string{"deploy"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := FindWorkloads(root, dirs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range sortedIDs(m.Workloads) {
		ids = append(ids, id.String())
	}
	wantIDs := []string{"default:deployment/app", "prod:cronjob/backup", "prod:deployment/redis"}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	var problems []string
	for _, p := range m.Problems {
		problems = append(problems, p.Error())
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"deploy/broken.yaml:", "malformed YAML", "default:deployment/twice is defined twice, in deploy/dup-a.yaml:1 and in deploy/sub/dup-b.yaml:1"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

func TestResolvePathsRefusesEscapes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, p := range []string{"../etc", "/etc", "", "missing", "a/../../b"} {
		if _, err := ResolvePaths(root, []string{p}); err == nil {
			t.Errorf("ResolvePaths(%q) succeeded", p)
		}
	}
	if _, err := ResolvePaths(root, nil); err != nil {
		t.Errorf("ResolvePaths(nil) = %v; want the root", err)
	}
}

const oneDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: prod}
spec:
  template:
    spec:
      containers:
      - {name: app, image: reg.example/app:1}
`

// Symbolic links in the repository are skipped with a Problem naming the
// file, never followed: a *.yaml link to /dev/zero would make fluxd read
// forever, one to a file outside the clone would show it. A file bigger
// than MaxFileSize is skipped too. The regular files around them are read.
func TestFindWorkloadsReadsOnlyRegularFilesOfBoundedSize(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	deploy := filepath.Join(root, "deploy")
	if err := os.MkdirAll(deploy, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(deploy, "app.yaml"), oneDeployment)
	write(filepath.Join(outside, "secret.yaml"), strings.ReplaceAll(oneDeployment, "name: app,", "name: leaked,"))
	big := oneDeployment + "# " + strings.Repeat("x", MaxFileSize) + "\n"
	write(filepath.Join(deploy, "big.yaml"), strings.ReplaceAll(big, "name: app,", "name: big,"))
	links := map[string]string{
		"zero.yaml":   "/dev/zero",
		"leak.yaml":   filepath.Join(outside, "secret.yaml"),
		"dir.yml":     outside,
		"outside.yml": filepath.Join(outside, "secret.yaml"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(deploy, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(deploy, "linked")); err != nil {
		t.Fatal(err)
	}

	m, err := FindWorkloads(root, []string{deploy})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Workloads) != 1 || m.Workloads[workloadNamed("app")] == nil {
		t.Errorf("workloads = %v; want only prod:deployment/app", m.Workloads)
	}
	problems := map[string]string{}
	for _, p := range m.Problems {
		var pe Problem
		if !errors.As(p, &pe) {
			t.Errorf("problem %v is not a Problem", p)
			continue
		}
		problems[pe.File] = pe.Error()
	}
	for name := range links {
		if msg := problems["deploy/"+name]; !strings.Contains(msg, "symbolic link") {
			t.Errorf("deploy/%s: problem %q, want one saying it is a symbolic link", name, msg)
		}
	}
	if msg := problems["deploy/big.yaml"]; !strings.Contains(msg, "4 MiB") {
		t.Errorf("deploy/big.yaml: problem %q, want one naming the size limit", msg)
	}
	if len(problems) != len(links)+1 {
		t.Errorf("problems: %v", problems)
	}

	// A git path that is itself a link is refused.
	if err := os.Symlink(outside, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolvePaths(root, []string{"elsewhere"}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("ResolvePaths(a link) = %v", err)
	}
}

func workloadNamed(name string) platform.ID {
	return platform.ID{Namespace: "prod", Kind: "deployment", Name: name}
}

// A directory on the way that is a link counts as much as the file: the
// file behind it, outside the clone, is not read, and a --git-path through
// it is refused.
func TestLinkedDirectoriesAreNotFollowed(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "prod"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "prod", "b.yaml"), []byte("kind: Deployment\nmetadata: {name: secret}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(root, "a/prod/b.yaml"); err == nil || !strings.Contains(err.Error(), "goes through a, a symbolic link") {
		t.Errorf("ReadFile through a linked directory: %v", err)
	}
	if _, err := ResolvePaths(root, []string{"a/prod"}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("ResolvePaths through a linked directory: %v", err)
	}
}
