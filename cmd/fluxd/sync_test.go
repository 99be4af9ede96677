package main

import (
	"strings"
	"testing"
)

// TestDefaultInventoryIsPerSource: two fluxd instances of different
// sources never share the default inventory, and the name carries no
// credential.
func TestDefaultInventoryIsPerSource(t *testing.T) {
	t.Parallel()
	a := defaultInventory("fluxd", syncSource("https://user:s3cret@git.example/a.git", "main", []string{"prod"}))
	b := defaultInventory("fluxd", syncSource("https://user:s3cret@git.example/a.git", "main", []string{"staging"}))
	c := defaultInventory("fluxd", syncSource("https://user:s3cret@git.example/a.git", "dev", []string{"prod"}))
	if a == b || a == c || b == c {
		t.Errorf("inventories %q, %q, %q: want one per source", a, b, c)
	}
	if !strings.HasPrefix(a, "fluxd/fluxd-sync-") {
		t.Errorf("inventory = %q, want fluxd/fluxd-sync-HASH", a)
	}
	if src := syncSource("https://user:s3cret@git.example/a.git", "main", nil); strings.Contains(src, "s3cret") {
		t.Errorf("source %q carries the password", src)
	}
}
