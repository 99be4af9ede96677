package oci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
)

func TestCredentialsFile(t *testing.T) {
	host := privateRegistry(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "registries.yaml")
	pwFile := filepath.Join(dir, "pw")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A wrong password first; then rotated in its file: the 401 re-reads
	// the credentials, and the scan succeeds without a restart.
	write(pwFile, "wrong\n")
	write(file, "registries:\n  \""+host+"\":\n    username: puller\n    passwordFile: "+pwFile+"\n")
	c, err := New(Config{Keychains: []authn.Keychain{NewSecretKeychain(CredentialsFile(file), time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Images(context.Background(), host+"/private"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	write(pwFile, "pw\n")
	imgs, err := c.Images(context.Background(), host+"/private")
	if err != nil || len(imgs) != 1 {
		t.Fatalf("after rotating the password file: %v %v", imgs, err)
	}

	for _, tc := range []struct{ content, want string }{
		{"registries:\n  ghcr.io: {username: bot}\n", "neither a username with a password"},
		{"registry:\n  ghcr.io: {}\n", "field registry not found"},
		{"registries: [", "expected registries"},
	} {
		write(file, tc.content)
		_, err := CredentialsFile(file)(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v; want an error naming the file and saying %q", tc.content, err, tc.want)
		}
	}
}

// A malformed file's error never quotes a value: it may be a password.
func TestCredentialsFileErrorHidesValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte("registries:\n  ghcr.io: \"user:hunter2-secret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := CredentialsFile(path)(context.Background())
	if err == nil || strings.Contains(err.Error(), "hunter") || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v; want the line, not the value", err)
	}
}
