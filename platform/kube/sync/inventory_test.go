package kubesync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fluxd/fluxd/platform"
)

// inventoryApplier is an Applier of inventory "fluxd/inv" over a fake
// client: enough for reading and writing the inventory.
func inventoryApplier() *Applier {
	return &Applier{cfg: Config{InventoryNamespace: "fluxd", InventoryName: "inv", Source: "file:///a.git branch main paths ."},
		c: fake.NewClientBuilder().Build(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// manyEntries are enough entries (none prunable) for several shards.
func manyEntries(n int) map[string]entry {
	entries := map[string]entry{}
	for i := 0; i < n; i++ {
		r := platform.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("team-%03d", i%100), Name: fmt.Sprintf("a-rather-long-object-name-for-the-inventory-%06d", i)}
		entries[refKey(r)] = entry{Ref: r, Digest: fmt.Sprintf("%032x", i), Witness: witness{UID: fmt.Sprintf("%036d", i), RV: fmt.Sprint(1000000 + i)}}
	}
	return entries
}

// TestInventoryTrustsNoShardFluxdDidNotWrite: a shard NAME-N that is not
// what fluxd wrote (here one that marks an object it never created as
// prunable, as git could apply before every shard was refused) is not
// read: its entries are forgotten, never invented, and the next write
// puts fluxd's back; the shards fluxd wrote are read whole.
func TestInventoryTrustsNoShardFluxdDidNotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := inventoryApplier()
	entries := manyEntries(12000)
	inv := newInventory()
	inv.entries = entries
	if err := a.writeInventory(ctx, inv); err != nil {
		t.Fatal(err)
	}
	read, err := a.readInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.stored) < 2 || len(read.entries) != len(entries) {
		t.Fatalf("read %d entries in %d shards, want %d in several", len(read.entries), len(read.stored), len(entries))
	}

	// Forge shard 1: one more entry, prunable.
	var cm corev1.ConfigMap
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: "fluxd", Name: "inv-1"}, &cm); err != nil {
		t.Fatal(err)
	}
	victim := platform.ObjectRef{APIVersion: "v1", Kind: "Secret", Namespace: "team-b", Name: "victim"}
	forged := strings.TrimSuffix(cm.Data[entriesKey], "]") + `,{"v":"v1","k":"Secret","ns":"team-b","n":"victim","p":true}]`
	cm.Data[entriesKey] = forged
	if err := a.c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	read, err = a.readInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := read.entries[refKey(victim)]; ok {
		t.Fatalf("the forged shard was read: %s is listed (prunable: %v)", victim, e.Prune)
	}
	var want []string // the entries of shard 1, which is no longer read
	for k := range entries {
		if shardOf(k, len(read.stored)) == 1 {
			want = append(want, k)
		}
	}
	if len(read.entries) != len(entries)-len(want) {
		t.Errorf("read %d entries, want %d (all but shard 1's %d)", len(read.entries), len(entries)-len(want), len(want))
	}

	// The next write puts fluxd's shard back, and it is read again.
	read.entries = entries
	if err := a.writeInventory(ctx, read); err != nil {
		t.Fatal(err)
	}
	if read, err = a.readInventory(ctx); err != nil || len(read.entries) != len(entries) {
		t.Fatalf("after fluxd wrote it again: %d entries (%v), want %d", len(read.entries), err, len(entries))
	}

	// An inventory of several shards without checksums (written before
	// they were kept) is read from its first shard alone.
	var first corev1.ConfigMap
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: "fluxd", Name: "inv"}, &first); err != nil {
		t.Fatal(err)
	}
	delete(first.Data, sumsKey)
	if err := a.c.Update(ctx, &first); err != nil {
		t.Fatal(err)
	}
	if read, err = a.readInventory(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range read.entries {
		if shardOf(k, len(read.stored)) != 0 {
			t.Fatalf("%s, of another shard than the first, was read without a checksum", k)
		}
	}
}

// TestGitMayNotWriteAnyInventoryShard: git's copy of the inventory's
// first ConfigMap, and of any NAME-N, is refused, whatever N; other
// ConfigMaps are not.
func TestGitMayNotWriteAnyInventoryShard(t *testing.T) {
	t.Parallel()
	a := inventoryApplier()
	cm := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	for name, refused := range map[string]bool{"inv": true, "inv-1": true, "inv-2": true, "inv-40": true, "inv-": false, "inv-1a": false, "inv-x": false, "inventory": false, "other-1": false} {
		why := a.refuse(cm("fluxd", name))
		if refused != (why != "") {
			t.Errorf("fluxd/%s: refused %q, want refused %v", name, why, refused)
		}
		if refused && !strings.Contains(why, "--sync-inventory fluxd/inv") {
			t.Errorf("fluxd/%s: %q does not name --sync-inventory", name, why)
		}
		if why := a.refuse(cm("apps", name)); why != "" {
			t.Errorf("apps/%s, another namespace: refused: %s", name, why)
		}
	}
}

// TestInventoryWriteCutShortKeepsEveryShardReadable: a write cut short
// before the first shard takes its final checksums (fluxd killed, the
// API server timing out) leaves every shard readable, as it was or as it
// became, so nothing fluxd created is forgotten and left unpruned.
func TestInventoryWriteCutShortKeepsEveryShardReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := inventoryApplier()
	entries := manyEntries(12000)
	inv := newInventory()
	inv.entries = entries
	if err := a.writeInventory(ctx, inv); err != nil {
		t.Fatal(err)
	}
	read, err := a.readInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every entry's digest moves, so every shard is rewritten; the
	// first shard's final write (sums with no alternatives) fails.
	next := map[string]entry{}
	for k, e := range read.entries {
		e.Digest = "moved-" + e.Digest
		next[k] = e
	}
	read.entries = next
	cut := a.c
	a.c = interceptor.NewClient(cut.(client.WithWatch), interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "inv" && !strings.Contains(cm.Data[sumsKey], "|") {
			return fmt.Errorf("the API server timed out")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	if err := a.writeInventory(ctx, read); err == nil {
		t.Fatal("the cut write did not fail")
	}
	a.c = cut
	after, err := a.readInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, raw := range after.stored {
		if raw == untrustedShard {
			t.Errorf("shard %d is not trusted after a write cut short: its objects would never be pruned", i)
		}
	}
	if len(after.entries) != len(entries) {
		t.Errorf("read %d entries after the cut write, want %d", len(after.entries), len(entries))
	}
	// And the next write completes: the first shard's sums have no
	// alternatives left.
	if err := a.writeInventory(ctx, after); err != nil {
		t.Fatal(err)
	}
	final, err := a.readInventory(ctx)
	if err != nil || strings.Contains(final.sums, "|") || len(final.entries) != len(entries) {
		t.Errorf("after the next write: %v, sums %q, %d entries", err, final.sums, len(final.entries))
	}
}
