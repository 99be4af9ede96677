package main

import (
	"os"
	"path/filepath"
	"testing"
)

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
