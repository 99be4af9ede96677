package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Seeded randomized runs of the invariant Write keeps on any mix of
// dialects: what it writes reads back as the change asked for, leaves no
// disagreement on a policy it wrote, touches nothing but policy
// annotations, and keeps a Flux v1 workload's prefix where Flux v1 can say
// the value.
func TestWriteReadsBackRandomized(t *testing.T) {
	t.Parallel()
	type choice struct{ k, v string }
	pool := []choice{
		{Automated, "true"}, {Automated, "false"}, {Locked, "true"}, {LockMessage, "m"}, {TagAll, "semver:minor"}, {TagPrefix + "app", "glob:main-*"},
		{"fluxcd.io/automated", "true"}, {"fluxcd.io/automated", "false"}, {"fluxcd.io/locked", "true"}, {"fluxcd.io/locked_msg", "x"},
		{"fluxcd.io/locked_user", "u"}, {"fluxcd.io/tag.app", "semver:~1.2"}, {"fluxcd.io/tag.app", "glob:*"}, {"fluxcd.io/ignore", "true"},
		{"flux.weave.works/automated", "true"}, {"flux.weave.works/locked", "true"}, {"flux.weave.works/tag.app", "regexp:^v"},
		{"filter.fluxcd.io/app", "semver:~4.0"}, {"filter.fluxcd.io/app", "glob:*"}, {"filter.fluxcd.io/sidecar", "regex:^v"},
		{KeelPolicy, "minor"}, {KeelPolicy, "all"}, {KeelPolicy, "force"}, {KeelMatchTag, "true"},
		{PinDigest, "true"}, {PinDigest, "false"}, {PinDigestPrefix + "app", "true"}, {FollowTag, "true"},
		{"other.example/keep", "me"},
	}
	changes := []map[string]string{
		{Automated: "true", AutomatedBy: "team"},
		{Automated: "", AutomatedBy: ""},
		{Locked: "true", LockMessage: "incident", LockedBy: "dana", LockedAt: "2026-12-01T15:00:00Z"},
		{Locked: "", LockMessage: "", LockedBy: "", LockedAt: ""},
		{TagPrefix + "app": "semver:~2.0"},
		{TagPrefix + "app": "semver:patch"},
		{TagPrefix + "app": ""},
		{TagAll: "glob:v?"},
		{TagPrerelease: "true"},
		{PinDigest: "true"},
		{PinDigest: "false", FollowTag: ""},
	}
	for seed := uint64(1); seed <= 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 22))
		raw := map[string]string{}
		for range r.IntN(5) {
			c := pool[r.IntN(len(pool))]
			raw[c.k] = c.v
		}
		set := changes[r.IntN(len(changes))]
		out := Write(raw, set)
		after := map[string]string{}
		for k, v := range raw {
			after[k] = v
		}
		for k, v := range out {
			if !ownKey(k) && !strings.HasPrefix(k, FluxPrefix) && !strings.HasPrefix(k, FluxLegacyPrefix) && !strings.HasPrefix(k, FluxFilterPrefix) && !strings.HasPrefix(k, "keel.sh/") {
				t.Fatalf("seed %d: Write(%v, %v) writes %s, not a policy annotation", seed, raw, set, k)
			}
			if v == "" {
				delete(after, k)
			} else {
				after[k] = v
			}
		}
		if after["other.example/keep"] != raw["other.example/keep"] {
			t.Fatalf("seed %d: Write(%v, %v) changed other.example/keep", seed, raw, set)
		}
		read, warnings := Read(after)
		for k, v := range set {
			got := read[k]
			if v == "" && (k == TagAll || strings.HasPrefix(k, TagPrefix)) {
				continue // a cleared filter falls back to the dialect's default
			}
			if !same(k, v, got) {
				t.Fatalf("seed %d: Write(%v, %v) = %v reads %s=%q, want %q (warnings %q)", seed, raw, set, out, k, got, v, warnings)
			}
		}
		for _, w := range warnings {
			for k := range set {
				if strings.Contains(w, "disagree") && strings.Contains(w, "by "+k+":") {
					t.Fatalf("seed %d: after Write(%v, %v) = %v, %s still disagrees: %s", seed, raw, set, out, k, w)
				}
			}
		}
		// The prefix in use is kept where Flux v1 can say the value.
		if p := fluxPrefixInUse(raw); p != "" {
			for k, v := range set {
				if _, own := raw[k]; own {
					continue
				}
				if fk, fv, ok := fluxForm(raw, p, k, v); ok {
					if got, has := out[fk]; !has || got != fv {
						t.Fatalf("seed %d: Write(%v, %v) = %v; want %s=%q (the workload uses %s)", seed, raw, set, out, fk, fv, p)
					}
					if _, has := out[k]; has {
						t.Fatalf("seed %d: Write(%v, %v) = %v writes fluxd's own %s on a %s workload", seed, raw, set, out, k, p)
					}
				}
			}
		}
	}
}

func ownKey(k string) bool {
	return strings.HasPrefix(k, "fluxd.io/")
}
