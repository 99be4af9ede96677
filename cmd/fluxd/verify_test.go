package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

// TestBadVerifyConfigStopsFluxdAtStart: fluxd refuses to start with a
// malformed --verify-config, naming the file's line, before it reaches
// for the cluster or the database.
func TestBadVerifyConfigStopsFluxdAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: signed\n  keys: [cosign.pub]\nrepositories:\n- match: ghcr.io/org/*\n  profile: sigend\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--verify-config=" + cfg, "--git-url=file:///nonexistent", "--state-dir=" + dir, "--kubeconfig=/nonexistent"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), `--verify-config: `) || !strings.Contains(err.Error(), `line 5: repositories "ghcr.io/org/*": no profile is named "sigend"`) {
		t.Fatalf("fluxd with a bad --verify-config: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "history.db")); statErr == nil {
		t.Error("fluxd opened its database before refusing the config")
	}
}

// An empty --verify-config is refused: the flag asks for verification.
func TestEmptyVerifyConfigIsRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "verify.yaml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (verifyFlags{config: cfg}).validate(); err == nil || !strings.Contains(err.Error(), "names no verification profile") {
		t.Errorf("validate: %v; want an empty config refused", err)
	}
}

// A keyless profile's trusted root that is JSON but not a trusted root
// stops fluxd at start, naming the profile's line and the file; the test
// CA's trusted root is taken.
func TestVerifyConfigTrustedRootIsCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: ci\n  keyless:\n  - issuer: https://token.actions.githubusercontent.com\n    subject: release@example.com\n  trustedRoot: trusted_root.json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "trusted_root.json")
	if err := os.WriteFile(root, []byte(`{"keys": ["not a trusted root"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (verifyFlags{config: cfg}).validate(); err == nil || !strings.Contains(err.Error(), `line 2: profile "ci": trusted root `+root) {
		t.Errorf("validate: %v; want the trusted root refused with the profile's line", err)
	}
	ca, err := cosigntest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteTrustedRoot(root); err != nil {
		t.Fatal(err)
	}
	if err := (verifyFlags{config: cfg}).validate(); err != nil {
		t.Errorf("validate with the test CA's trusted root: %v", err)
	}
}

// A trusted root rewritten while fluxd runs into one that is not is
// refused like a bad line: the config in force, and its root, stay.
func TestVerifyConfigTrustedRootIsCheckedOnReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: ci\n  keyless:\n  - issuer: https://token.actions.githubusercontent.com\n    subject: release@example.com\n  trustedRoot: trusted_root.json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "trusted_root.json")
	ca, err := cosigntest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteTrustedRoot(root); err != nil {
		t.Fatal(err)
	}
	file, err := openVerifyConfig(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := file.Current().Profiles[0].TrustedRootJSON
	if err := os.WriteFile(root, []byte(`{"keys": ["not a trusted root"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := file.Reload(); err == nil || !strings.Contains(err.Error(), `line 2: profile "ci": trusted root `+root) || !strings.Contains(err.Error(), "in force is kept") {
		t.Fatalf("Reload: %v; want the trusted root refused with the profile's line", err)
	}
	if got := file.Current().Profiles[0].TrustedRootJSON; string(got) != string(good) {
		t.Errorf("the trusted root in force changed to %s", got)
	}
}
