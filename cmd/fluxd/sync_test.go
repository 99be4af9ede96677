package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxd/fluxd/syncer"
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

// TestSyncMetricsAbsentBeforeASync: a replica that has not synced (a
// follower) exports no fluxd_sync_* series, not zeros.
func TestSyncMetricsAbsentBeforeASync(t *testing.T) {
	t.Parallel()
	s := syncer.New(syncer.Config{Interval: time.Hour}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewPedanticRegistry()
	registerSyncMetrics(reg, s)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("series before any sync = %d (%v), want none", n, err)
	}
}
