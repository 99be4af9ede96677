package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/platform"
)

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
