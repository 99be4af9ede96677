package verify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writePublicKey(t *testing.T, path string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
}

// write replaces path's content at once (a new file renamed over it, as
// editors and a ConfigMap's volume do), so that a watcher polling every
// few milliseconds on a loaded machine never sees it half written: the
// tests below are about reloads, not torn writes, which Watch refuses
// as a bad config and keeps the one in force.
func write(t *testing.T, path, s string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadReadsTheKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePublicKey(t, filepath.Join(dir, "cosign.pub"))
	write(t, filepath.Join(dir, "trusted_root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, strings.ReplaceAll(strings.ReplaceAll(issueConfig, "/etc/fluxd/cosign.pub", "cosign.pub"), "/etc/fluxd/", ""))
	l, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := l.Keys["signed"]
	if len(keys) != 1 || keys[0].Path != filepath.Join(dir, "cosign.pub") || !strings.HasPrefix(keys[0].ID, "sha256:") || len(keys[0].ID) != 71 {
		t.Errorf("keys %+v, want cosign.pub, beside the config, with its id", keys)
	}
	if p, _ := l.Profile("ci"); p.TrustedRoot != filepath.Join(dir, "trusted_root.json") {
		t.Errorf("trusted root %q, want it beside the config", p.TrustedRoot)
	}
}

func TestLoadRefusesBadFilesWithTheProfilesLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePublicKey(t, filepath.Join(dir, "ok.pub"))
	write(t, filepath.Join(dir, "cosign.key"), "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
	write(t, filepath.Join(dir, "root.json"), "not json")
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, `profiles:
- name: a
  keys: [ok.pub, missing.pub]
- name: b
  keys: [cosign.key]
- name: c
  trustedRoot: root.json
  keyless:
  - issuer: https://i
    subject: me
`)
	_, err := Load(cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want a *ConfigError", err)
	}
	for _, want := range []string{
		`line 2: profile "a": reading key: open ` + filepath.Join(dir, "missing.pub"),
		`line 4: profile "b": key ` + filepath.Join(dir, "cosign.key") + ` holds a "ENCRYPTED SIGSTORE PRIVATE KEY" PEM block, not a PUBLIC KEY: give the public half (cosign.pub)`,
		`line 6: profile "c": trustedRoot: ` + filepath.Join(dir, "root.json") + " is not JSON",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if len(ce.Problems) != 3 {
		t.Errorf("%d problems, want 3: %v", len(ce.Problems), err)
	}
}

// A reload that fails keeps the config in force, and says where the new
// one is wrong.
func TestReloadKeepsTheOldConfigOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePublicKey(t, filepath.Join(dir, "cosign.pub"))
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n")
	f, err := OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n- name: ci\n  keyz: [ci.pub]\n")
	err = f.Reload()
	if err == nil || !strings.Contains(err.Error(), `line 5: a profile: unknown field "keyz"`) || !strings.Contains(err.Error(), "in force is kept") {
		t.Fatalf("Reload: %v, want the bad line and that the old config is kept", err)
	}
	if _, ok := f.Current().Profile("signed"); !ok || len(f.Current().Profiles) != 1 {
		t.Errorf("the config in force changed after a failed reload: %+v", f.Current().Config)
	}
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n- name: ci\n  keys: [cosign.pub]\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Current().Profile("ci"); !ok {
		t.Errorf("a good reload was not taken")
	}
	// Emptied (or caught empty mid-write): refused, not "verify nothing".
	write(t, cfg, "")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "names no profile") {
		t.Errorf("Reload of an empty config: %v; want it refused", err)
	}
	if _, ok := f.Current().Profile("ci"); !ok {
		t.Errorf("an empty config replaced the one in force")
	}
	if _, err := OpenFile(filepath.Join(dir, "nope.yaml")); err == nil {
		t.Errorf("opening a missing config succeeded")
	}
}

// Watch takes a good edit of the config, or of a key it names, and keeps
// the config in force on a bad one, saying why once.
func TestWatchReloadsOnChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePublicKey(t, filepath.Join(dir, "cosign.pub"))
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n")
	f, err := OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reports := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Watch(ctx, 5*time.Millisecond, func(err error) { reports <- err })
	next := func() error {
		t.Helper()
		select {
		case err := <-reports:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload")
			return nil
		}
	}
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n- name: ci\n  keyz: [ci.pub]\n")
	if err := next(); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("a bad edit: %v; want it refused with its line", err)
	}
	if len(f.Current().Profiles) != 1 {
		t.Errorf("a bad edit replaced the config in force")
	}
	select {
	case err := <-reports:
		t.Errorf("the same bad content was reported again: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	write(t, cfg, "profiles:\n- name: signed\n  keys: [cosign.pub]\n- name: ci\n  keys: [cosign.pub]\n")
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Current().Profile("ci"); !ok {
		t.Errorf("a good edit was not taken")
	}
	old := f.Current().Keys["signed"][0].ID
	writePublicKey(t, filepath.Join(dir, "cosign.pub"))
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if f.Current().Keys["signed"][0].ID == old {
		t.Errorf("a new key in the same file was not read")
	}
}
