package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLeakedSecretsFindsNotedSecretsOnly(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	os.WriteFile(filepath.Join(dir, "logs", "fluxd.log"), []byte("level=INFO msg=x token=s3cret-token-value\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "logs", "etcd.log"), []byte("nothing here\n"), 0o644)
	NoteSecret("a test token", "s3cret-token-value")
	NoteSecret("another", "never-logged-secret")
	NoteSecret("too short", "abc")
	leaks, err := LeakedSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaks) != 1 || !strings.Contains(leaks[0], "fluxd.log holds a test token (1 times)") || strings.Contains(leaks[0], "s3cret") {
		t.Errorf("leaks = %q", leaks)
	}
}
