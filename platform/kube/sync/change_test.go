package kubesync

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fluxd/fluxd/platform"
)

// TestShardsKeepEveryEntryUnderTheLimit: 12,000 entries with long names
// (over 1 MiB as one list) are spread over shards each under shardMax,
// every entry exactly once; the encoding is deterministic, and a change
// to one entry rewrites one shard.
func TestShardsKeepEveryEntryUnderTheLimit(t *testing.T) {
	t.Parallel()
	entries := map[string]entry{}
	rng := rand.New(rand.NewPCG(27, 10))
	for i := 0; i < 12000; i++ {
		r := platform.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("team-%03d", i%100), Name: fmt.Sprintf("a-rather-long-object-name-for-the-inventory-%06d", i)}
		entries[refKey(r)] = entry{Ref: r, Prune: i%3 == 0, Digest: fmt.Sprintf("%032x", rng.Uint64()), Witness: witness{UID: fmt.Sprintf("%036d", i), RV: fmt.Sprint(1000000 + i), Gen: int64(i % 5)}}
	}
	data, err := shards(entries)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	if len(data) < 2 {
		t.Fatalf("%d shards for 12,000 entries", len(data))
	}
	got := map[string]entry{}
	for i, d := range data {
		total += len(d)
		if len(d) > shardMax {
			t.Errorf("shard %d holds %d bytes, over %d", i, len(d), shardMax)
		}
		var ws []wireEntry
		if err := json.Unmarshal([]byte(d), &ws); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			e := entry{Ref: platform.ObjectRef{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}, Prune: w.Prune, Digest: w.Digest, Witness: witness{UID: w.UID, RV: w.RV, Gen: w.Gen}}
			if _, dup := got[refKey(e.Ref)]; dup {
				t.Errorf("%s is in two shards", e.Ref)
			}
			got[refKey(e.Ref)] = e
		}
	}
	if total <= 1<<20 {
		t.Fatalf("the test's entries take %d bytes: not over 1 MiB", total)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries decoded, want %d", len(got), len(entries))
	}
	for k, e := range entries {
		if got[k] != e {
			t.Fatalf("%s decoded as %+v, want %+v", k, got[k], e)
		}
	}
	again, _ := shards(entries)
	for k, e := range entries {
		e.Witness.RV = "changed"
		entries[k] = e
		break
	}
	after, _ := shards(entries)
	diff := 0
	for i := range data {
		if again[i] != data[i] {
			t.Fatalf("shard %d differs between two encodings of the same entries", i)
		}
		if after[i] != data[i] {
			diff++
		}
	}
	if diff != 1 {
		t.Errorf("one entry changed and %d shards with it, want 1", diff)
	}
}

// TestChangeOf: an object is sent only when git or the cluster changed
// it since fluxd's apply; a status update (a new resourceVersion, the same
// generation) of a Deployment is not a change, of a ConfigMap it is
// looked at again.
func TestChangeOf(t *testing.T) {
	t.Parallel()
	obj := func(apiVersion, kind string, ann map[string]string) *item {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("ns")
		u.SetName("x")
		u.SetAnnotations(ann)
		return &item{u: u, key: keyOf(u), digest: "d1"}
	}
	live := func(uid, rv string, gen int64, ann map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv, Generation: gen, Annotations: ann}}
	}
	w := witness{UID: "u1", RV: "10", Gen: 2}
	ann := map[string]string{"team": "a"}
	for _, tc := range []struct {
		name string
		e    entry
		it   *item
		live *metav1.PartialObjectMetadata
		want change
	}{
		{"nothing changed", entry{Digest: "d1", Witness: w}, obj("v1", "ConfigMap", nil), live("u1", "10", 0, nil), changeNone},
		{"git changed", entry{Digest: "d0", Witness: w}, obj("v1", "ConfigMap", nil), live("u1", "10", 0, nil), changeGit},
		{"deleted", entry{Digest: "d1", Witness: w}, obj("v1", "ConfigMap", nil), nil, changeGit},
		{"never applied, absent", entry{}, obj("v1", "ConfigMap", nil), nil, changeGit},
		{"never witnessed, present", entry{}, obj("v1", "ConfigMap", nil), live("u1", "10", 0, nil), changeLive},
		{"edited by hand", entry{Digest: "d1", Witness: w}, obj("v1", "ConfigMap", nil), live("u1", "11", 0, nil), changeLive},
		{"recreated by someone", entry{Digest: "d1", Witness: w}, obj("v1", "ConfigMap", nil), live("u2", "10", 0, nil), changeLive},
		{"Deployment status update", entry{Digest: "d1", Witness: w}, obj("apps/v1", "Deployment", ann), live("u1", "15", 2, map[string]string{"team": "a", "deployment.kubernetes.io/revision": "1"}), changeNone},
		{"Deployment spec edited", entry{Digest: "d1", Witness: w}, obj("apps/v1", "Deployment", ann), live("u1", "15", 3, ann), changeLive},
		{"Deployment annotation removed", entry{Digest: "d1", Witness: w}, obj("apps/v1", "Deployment", ann), live("u1", "15", 2, nil), changeLive},
		{"Service status update", entry{Digest: "d1", Witness: w}, obj("v1", "Service", nil), live("u1", "15", 2, nil), changeLive},
	} {
		if got := changeOf(tc.e, tc.it, tc.live); got != tc.want {
			t.Errorf("%s: change %d, want %d", tc.name, got, tc.want)
		}
	}
}
