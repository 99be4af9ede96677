package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadNotifyConfigStopsFluxdAtStart: fluxd refuses to start with a
// malformed --notify-config, naming the file's line, before it reaches
// for the cluster or the database.
func TestBadNotifyConfigStopsFluxdAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "notify.yaml")
	if err := os.WriteFile(cfg, []byte("receivers:\n  - name: chat\n    type: slack\n    url: https://hooks.example/x\n  - name: bad\n    type: pager\n    url: https://x.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--notify-config=" + cfg, "--git-url=file:///nonexistent", "--state-dir=" + dir, "--kubeconfig=/nonexistent"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), `line 5: receiver "bad": type "pager" is not one of`) {
		t.Fatalf("fluxd with a bad --notify-config: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "history.db")); statErr == nil {
		t.Error("fluxd opened its database before refusing the config")
	}
}
