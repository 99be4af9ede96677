package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// -o yaml is the same document as -o json.
func TestWriteDataYAMLIsTheJSONDocument(t *testing.T) {
	t.Parallel()
	v := []serviceJSON{{ID: "default:deployment/web", Status: "ready", Containers: []containerJSON{{Name: "app", Image: "reg/web:1.0"}}, TagFilters: map[string]string{"app": "semver:~1"}}}
	var j, y bytes.Buffer
	if err := writeData(&j, "json", v); err != nil {
		t.Fatal(err)
	}
	if err := writeData(&y, "yaml", v); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, y.String())
	}
	if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
		t.Errorf("yaml and json differ (-json +yaml):\n%s", diff)
	}
	if err := checkOutput("xml"); err == nil {
		t.Error("-o xml accepted")
	}
}

// fluxctl names its user as Flux v1's did: git's "Name <email>" from git's
// own configuration, else $USER.
func TestCurrentUserFromGitConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := filepath.Join(dir, "gitconfig")
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("USER", "unix-name")

	if got := currentUser(); got != "unix-name" {
		t.Errorf("without git's user: %q; want $USER", got)
	}
	if err := os.WriteFile(cfg, []byte("[user]\n\tname = Jane Doe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := currentUser(); got != "Jane Doe" {
		t.Errorf("with user.name only: %q", got)
	}
	if err := os.WriteFile(cfg, []byte("[user]\n\tname = Jane Doe\n\temail = jane@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := currentUser(); got != "Jane Doe <jane@example.com>" {
		t.Errorf("with user.name and user.email: %q", got)
	}
}
