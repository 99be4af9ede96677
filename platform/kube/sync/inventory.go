package kubesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxd/fluxd/platform"
)

// The inventory lists every object the sync applied, with what it knows
// of each: whether pruning may delete it (fluxd created it, or it opted
// in), the digest of its rendered form as last applied, and the witness
// of its live copy right after (uid, resourceVersion, generation). Pruning
// deletes only objects listed as prunable: an object fluxd never created
// is never its to delete. The digest and witness let a sync skip every
// object that changed neither in git nor in the cluster (see change.go).
//
// A ConfigMap holds at most 1 MiB, about 5,000 entries, so the inventory
// is sharded: the ConfigMap NAME holds the shard count and the first
// shard, NAME-1 … NAME-(n-1) the others. An entry's shard is a hash of its
// key, so a change to one object rewrites one shard, and only shards whose
// content changed are written: a sync that changed nothing writes nothing.
//
// fluxd trusts no shard it did not write. The first ConfigMap is the root
// of that trust: git may never write it (nor any NAME-N: deny.go), and
// fluxd writes it last, with a checksum of every other shard's entries
// (sumsKey). A shard whose entries do not match (one git applied before
// shards were refused, one someone wrote by hand, one left by a write cut
// short) is not read: what it lists is forgotten, so never pruned, and the
// next write replaces it. A checksum rather than a signature: everything
// that could forge the first ConfigMap (RBAC on ConfigMaps in the
// inventory's namespace) could as well delete or rewrite all of it, or
// fluxd's own Deployment in its namespace, and a key would need a Secret
// that same RBAC guards; the shards' weak point was that git could write
// the others, and that is what a checksum held in the first closes.
const (
	entriesKey = "entries.json" // a shard's entries
	shardsKey  = "shards"       // in the first ConfigMap: how many shards
	sumsKey    = "shard-sums"   // in the first ConfigMap: the checksums of NAME-1 … NAME-(n-1), comma-separated
	legacyKey  = "objects.json" // the single-ConfigMap list of refs before shards; read, never written
)

// untrustedShard stands, in inventory.stored, for a shard fluxd did not
// write: it equals no shard's entries, so the next write replaces it.
const untrustedShard = "untrusted"

// shardTarget is the size the shards are sized for; shardMax the most one
// may hold (an unlucky hash adds a shard). Both leave room under the API
// server's 1 MiB for the ConfigMap's metadata.
const (
	shardTarget = 512 << 10
	shardMax    = 900 << 10
)

// The inventory names the source it lists objects of (git URL, branch,
// paths: Config.Source) and a hash of it, so that two fluxd instances (or
// one whose --git-path changed) given the same ConfigMap do not prune
// each other's objects: a sync finding another source's inventory applies
// but neither prunes nor rewrites it.
const (
	annotationSource = "fluxd.io/sync-source"
	annotationOwner  = "fluxd.io/sync-owner"
)

// OwnerOf is the owner hash of source, as the inventory stores it.
func OwnerOf(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:8])
}

// foreignInventoryError is an inventory another source wrote.
type foreignInventoryError struct {
	ns, name, theirs, ours string
}

func (e *foreignInventoryError) Error() string {
	return fmt.Sprintf("the sync inventory ConfigMap %s/%s lists the objects of another source (%s), not of this fluxd's (%s): another fluxd shares it, or --git-url, --git-branch or --git-path changed; this sync applied git but pruned nothing and left the inventory alone. Give each fluxd its own --sync-inventory (the default is derived from the source), or delete the ConfigMap if that source is gone (nothing it lists will then be pruned)", e.ns, e.name, e.theirs, e.ours)
}

// witness is what the cluster said of an object right after fluxd applied
// it (or found it equal to git): while its live copy still shows the same,
// nobody changed it since.
type witness struct {
	UID, RV string
	Gen     int64
}

// entry is one object of the inventory.
type entry struct {
	Ref platform.ObjectRef
	// Prune: fluxd created it, or it opted in; pruning may delete it.
	Prune bool
	// Digest is that of its rendered form as last applied; "" unknown.
	Digest string
	// Witness is its live copy's after that apply; zero unknown.
	Witness witness
}

// inventory is the entries by object key, and the shards as read, so
// that only changed ones are written back.
type inventory struct {
	entries map[string]entry
	stored  []string // each shard's entries.json as read, by index
	sums    string   // the first ConfigMap's sumsKey as read
	ours    bool     // the first ConfigMap carries our owner annotation
}

func newInventory() inventory { return inventory{entries: map[string]entry{}} }

// wireEntry is an entry as stored: short keys, as there are thousands.
type wireEntry struct {
	APIVersion string `json:"v"`
	Kind       string `json:"k"`
	Namespace  string `json:"ns,omitempty"`
	Name       string `json:"n"`
	Prune      bool   `json:"p,omitempty"`
	Digest     string `json:"d,omitempty"`
	UID        string `json:"u,omitempty"`
	RV         string `json:"rv,omitempty"`
	Gen        int64  `json:"g,omitempty"`
}

func (a *Applier) shardName(i int) string {
	if i == 0 {
		return a.cfg.InventoryName
	}
	return fmt.Sprintf("%s-%d", a.cfg.InventoryName, i)
}

func (a *Applier) readInventory(ctx context.Context) (inventory, error) {
	inv := newInventory()
	var cm corev1.ConfigMap
	err := a.c.Get(ctx, client.ObjectKey{Namespace: a.cfg.InventoryNamespace, Name: a.cfg.InventoryName}, &cm)
	if apierrors.IsNotFound(err) {
		return inv, nil
	}
	if err != nil {
		return inventory{}, fmt.Errorf("reading the sync inventory ConfigMap %s/%s: %w (fluxd needs get, create, patch and delete on it and on %s-N)", a.cfg.InventoryNamespace, a.cfg.InventoryName, err, a.cfg.InventoryName)
	}
	if owner := cm.Annotations[annotationOwner]; owner != "" && owner != OwnerOf(a.cfg.Source) {
		theirs := cm.Annotations[annotationSource]
		if theirs == "" {
			theirs = "owner " + owner
		}
		return inventory{}, &foreignInventoryError{ns: a.cfg.InventoryNamespace, name: a.cfg.InventoryName, theirs: theirs, ours: a.cfg.Source}
	} else if owner != "" {
		inv.ours = true
	}
	broken := func(name string, err error) error {
		return fmt.Errorf("the sync inventory ConfigMap %s/%s does not parse (%w); fluxd will not prune until it is fixed or the inventory (%s and %s-N) deleted (deleting it makes fluxd forget what it applied, so nothing is pruned until it is applied again)", a.cfg.InventoryNamespace, name, err, a.cfg.InventoryName, a.cfg.InventoryName)
	}
	if raw := cm.Data[legacyKey]; raw != "" {
		// Written before shards: refs of prunable objects, nothing else.
		var refs []platform.ObjectRef
		if err := json.Unmarshal([]byte(raw), &refs); err != nil {
			return inventory{}, broken(a.cfg.InventoryName, err)
		}
		for _, r := range refs {
			inv.entries[refKey(r)] = entry{Ref: r, Prune: true}
		}
		inv.stored = []string{""}
		return inv, nil
	}
	n := 1
	if s := cm.Data[shardsKey]; s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			return inventory{}, broken(a.cfg.InventoryName, fmt.Errorf("%s is %q", shardsKey, s))
		}
	}
	inv.stored = make([]string, n)
	inv.sums = cm.Data[sumsKey]
	sums := strings.Split(inv.sums, ",")
	for i := 0; i < n; i++ {
		if i > 0 {
			cm = corev1.ConfigMap{}
			err := a.c.Get(ctx, client.ObjectKey{Namespace: a.cfg.InventoryNamespace, Name: a.shardName(i)}, &cm)
			if apierrors.IsNotFound(err) {
				// A write cut short: what it held is forgotten, so those
				// objects are not pruned (never the other way round).
				continue
			}
			if err != nil {
				return inventory{}, fmt.Errorf("reading the sync inventory ConfigMap %s/%s: %w", a.cfg.InventoryNamespace, a.shardName(i), err)
			}
		}
		raw := cm.Data[entriesKey]
		if i > 0 && (i > len(sums) || !slices.Contains(strings.Split(sums[i-1], "|"), shardSum(i, raw))) {
			a.log.Warn("a sync inventory shard does not match the checksum fluxd recorded when it wrote the inventory, so fluxd did not write it (git or someone with access to ConfigMaps did, or a write was cut short): what it lists is not read, so not pruned, and fluxd writes the shard again", "configmap", a.cfg.InventoryNamespace+"/"+a.shardName(i))
			inv.stored[i] = untrustedShard
			continue
		}
		inv.stored[i] = raw
		if raw == "" {
			continue
		}
		var ws []wireEntry
		if err := json.Unmarshal([]byte(raw), &ws); err != nil {
			return inventory{}, broken(a.shardName(i), err)
		}
		for _, w := range ws {
			e := entry{Ref: platform.ObjectRef{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}, Prune: w.Prune, Digest: w.Digest,
				Witness: witness{UID: w.UID, RV: w.RV, Gen: w.Gen}}
			inv.entries[refKey(e.Ref)] = e
		}
	}
	return inv, nil
}

// shards encodes the entries into as few shards as keep each under
// shardMax, every entry in the shard its key hashes to, each sorted.
func shards(entries map[string]entry) ([]string, error) {
	keys := make([]string, 0, len(entries))
	enc := map[string][]byte{}
	total := 0
	for k, e := range entries {
		b, err := json.Marshal(wireEntry{APIVersion: e.Ref.APIVersion, Kind: e.Ref.Kind, Namespace: e.Ref.Namespace, Name: e.Ref.Name, Prune: e.Prune,
			Digest: e.Digest, UID: e.Witness.UID, RV: e.Witness.RV, Gen: e.Witness.Gen})
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
		enc[k] = b
		total += len(b) + 1
	}
	sort.Strings(keys)
	n := max(1, (total+shardTarget-1)/shardTarget)
	for ; ; n++ {
		buckets := make([][]string, n)
		sizes := make([]int, n)
		fits := true
		for _, k := range keys {
			i := shardOf(k, n)
			buckets[i] = append(buckets[i], k)
			if sizes[i] += len(enc[k]) + 1; sizes[i] > shardMax {
				fits = false
			}
		}
		if !fits {
			continue
		}
		out := make([]string, n)
		for i, b := range buckets {
			buf := make([]byte, 0, sizes[i]+2)
			buf = append(buf, '[')
			for j, k := range b {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, enc[k]...)
			}
			out[i] = string(append(buf, ']'))
		}
		return out, nil
	}
}

// shardSum is shard i's checksum, as the first shard records it: its
// index and its entries, so that no shard's entries pass for another's.
func shardSum(i int, raw string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", i)
	h.Write([]byte(raw))
	return hex.EncodeToString(h.Sum(nil))
}

// shardSums is sumsKey's value for the shards data: every shard's but the
// first's.
func shardSums(data []string) string {
	sums := make([]string, 0, len(data))
	for i := 1; i < len(data); i++ {
		sums = append(sums, shardSum(i, data[i]))
	}
	return strings.Join(sums, ",")
}

func shardOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// writeInventory stores inv, writing only the shards that changed: the
// others first, then the first (which says how many there are, and holds
// their checksums), then deleting shards no longer counted. A write cut short leaves entries
// forgotten, never invented: what is forgotten is not pruned.
func (a *Applier) writeInventory(ctx context.Context, inv inventory) error {
	data, err := shards(inv.entries)
	if err != nil {
		return err
	}
	sums := shardSums(data)
	write := func(i int) error {
		d := map[string]string{entriesKey: data[i]}
		if i == 0 {
			d[shardsKey] = strconv.Itoa(len(data))
			if sums != "" {
				d[sumsKey] = sums
			}
		}
		return a.writeShard(ctx, i, d)
	}
	changed := func(i int) bool { return i >= len(inv.stored) || inv.stored[i] != data[i] }
	// Two phases when other shards change: the first shard is written
	// first accepting each shard's old content and its new (sums of
	// "new|old"), then the shards, then the first with the new sums
	// alone. A write cut short anywhere leaves every shard readable, as
	// it was or as it became; with the first shard written last only, a
	// cut between the shards and it left rewritten shards failing their
	// sums, and the objects fluxd created there forgotten, so never
	// pruned (review of issue 31).
	others := false
	for i := 1; i < len(data); i++ {
		others = others || changed(i)
	}
	if others && inv.ours && len(inv.stored) > 0 {
		n := max(len(data), len(inv.stored))
		old := strings.Split(inv.sums, ",")
		both := make([]string, 0, n-1)
		for i := 1; i < n; i++ {
			var alts []string
			if i < len(data) {
				alts = append(alts, shardSum(i, data[i]))
			}
			if i-1 < len(old) && old[i-1] != "" && (i >= len(data) || !slices.Contains(strings.Split(old[i-1], "|"), alts[0])) {
				alts = append(alts, old[i-1])
			}
			both = append(both, strings.Join(alts, "|"))
		}
		d := map[string]string{entriesKey: inv.stored[0], shardsKey: strconv.Itoa(n), sumsKey: strings.Join(both, ",")}
		if err := a.writeShard(ctx, 0, d); err != nil {
			return err
		}
	}
	for i := 1; i < len(data); i++ {
		if changed(i) {
			if err := write(i); err != nil {
				return err
			}
		}
	}
	if changed(0) || others || len(data) != len(inv.stored) || !inv.ours || sums != inv.sums {
		if err := write(0); err != nil {
			return err
		}
	}
	for i := len(data); i < len(inv.stored); i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.InventoryNamespace, Name: a.shardName(i)}}
		if err := a.c.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the sync inventory ConfigMap %s/%s, a shard no longer used: %w", a.cfg.InventoryNamespace, a.shardName(i), err)
		}
	}
	return nil
}

// writeShard applies shard i's ConfigMap with data d.
func (a *Applier) writeShard(ctx context.Context, i int, d map[string]string) error {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.InventoryNamespace, Name: a.shardName(i), Labels: map[string]string{"app.kubernetes.io/managed-by": "fluxd"},
			Annotations: map[string]string{annotationSource: a.cfg.Source, annotationOwner: OwnerOf(a.cfg.Source)}},
		Data: d,
	}
	if err := a.c.Patch(ctx, cm, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the sync inventory ConfigMap %s/%s: %w", a.cfg.InventoryNamespace, a.shardName(i), err)
	}
	return nil
}

// inventoryAfter is the inventory once a sync is done: every object of git
// this sync applied or found unchanged, with its new digest and witness
// (failed ones as they were), and the old prunable entries that were kept
// (not pruned, or not yet). An object is prunable when this sync created
// it, when it was prunable already, or when it is annotated fluxd.io/prune:
// enabled in git; an object of git that existed before fluxd applied it
// (adopted: its first apply changed it or found it unchanged) is listed
// but not prunable, so pruning never deletes what fluxd did not create.
func inventoryAfter(old inventory, items []*item, keep []entry) inventory {
	inv := newInventory()
	inv.stored, inv.sums, inv.ours = old.stored, old.sums, old.ours
	for _, it := range items {
		prev, listed := old.entries[it.key]
		switch it.res.Action {
		case platform.ActionFailed, platform.ActionSkipped, "":
			if listed {
				inv.entries[it.key] = prev
			}
			continue
		}
		e := entry{Ref: refOf(it.u), Prune: prev.Prune, Digest: it.digest, Witness: it.witness}
		if it.res.Action == platform.ActionCreated || it.u.GetAnnotations()[platform.AnnotationPrune] == "enabled" {
			e.Prune = true
		}
		inv.entries[it.key] = e
	}
	for _, e := range keep {
		inv.entries[refKey(e.Ref)] = e
	}
	return inv
}

func refKey(r platform.ObjectRef) string {
	gvk := gvkOf(r)
	return gvk.Group + "/" + gvk.Kind + "/" + r.Namespace + "/" + r.Name
}
