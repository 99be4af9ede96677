package policy

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/registry"
	"github.com/google/go-cmp/cmp"
)

// pol is the part of a read policy the tests compare: fluxd's own keys.
func pol(ann map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		if strings.HasPrefix(k, "fluxd.io/") {
			out[k] = v
		}
	}
	return out
}

// Each case is one rule of Flux v1 (fluxcd/flux pkg/policy and the
// "automated image update" reference) or of Keel (keel-hq/keel
// internal/policy), named after it.
func TestReadPeerRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  map[string]string
		want map[string]string
		// warn is a part of the one warning expected; "" expects none.
		warn string
	}{
		{name: "flux v1: fluxcd.io/automated true automates, every tag by default (glob:*)",
			raw:  map[string]string{"fluxcd.io/automated": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "flux v1: flux.weave.works/automated is the same policy under the older prefix",
			raw:  map[string]string{"flux.weave.works/automated": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "flux v1: a boolean policy is on only when \"true\"",
			raw:  map[string]string{"fluxcd.io/automated": "yes", "fluxcd.io/locked": "false"},
			want: map[string]string{Automated: "false", Locked: "false", TagAll: "glob:*"}},
		{name: "flux v1: locked with locked_msg and locked_user",
			raw:  map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_msg": "incident 42", "fluxcd.io/locked_user": "alex <alex@example.com>"},
			want: map[string]string{Locked: "true", LockMessage: "incident 42", LockedBy: "alex <alex@example.com>", TagAll: "glob:*"}},
		{name: "flux v1: tag.<container> semver:~1.2 is a Masterminds range",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "semver:~1.2"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:~1.2", TagAll: "glob:*"}},
		{name: "flux v1: tag.<container> glob:1.21.* is a glob",
			raw:  map[string]string{"fluxcd.io/tag.chart-image": "glob:1.21.*"},
			want: map[string]string{TagPrefix + "chart-image": "glob:1.21.*", TagAll: "glob:*"}},
		{name: "flux v1: a pattern with no prefix is a glob",
			raw:  map[string]string{"fluxcd.io/tag.app": "master-*"},
			want: map[string]string{TagPrefix + "app": "glob:master-*", TagAll: "glob:*"}},
		{name: "flux v1: glob:* means every tag",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "glob:*"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "glob:*", TagAll: "glob:*"}},
		{name: "flux v1: in a glob only * is special",
			raw:  map[string]string{"fluxcd.io/tag.app": "glob:v?.[1]"},
			want: map[string]string{TagPrefix + "app": `glob:v\?.\[1]`, TagAll: "glob:*"}},
		{name: "flux v1: regexp: and regex: are both regular expressions",
			raw:  map[string]string{"fluxcd.io/tag.a": "regexp:^prod-[0-9a-f]{7}$", "fluxcd.io/tag.b": "regex:^v1"},
			want: map[string]string{TagPrefix + "a": "regex:^prod-[0-9a-f]{7}$", TagPrefix + "b": "regex:^v1", TagAll: "glob:*"}},
		{name: "flux v1: ignore true leaves the workload out of releases (and the sync leaves it out too)",
			raw:  map[string]string{"fluxcd.io/ignore": "true"},
			want: map[string]string{Locked: "true", LockMessage: `ignored (fluxcd.io/ignore: "true")`, TagAll: "glob:*"}},
		{name: "flux v1: ignore sync_only still releases (it only keeps the object from being pruned)",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/ignore": "sync_only"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "flux v1: both prefixes agreeing is no conflict",
			raw:  map[string]string{"fluxcd.io/automated": "true", "flux.weave.works/automated": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "precedence: fluxcd.io/ wins over flux.weave.works/, with a warning",
			raw:  map[string]string{"fluxcd.io/automated": "false", "flux.weave.works/automated": "true"},
			want: map[string]string{Automated: "false", TagAll: "glob:*"},
			warn: `flux.weave.works/automated: "true" is overridden by fluxcd.io/automated: "false"`},
		{name: "precedence: fluxd's own wins over Flux v1, with a warning",
			raw:  map[string]string{Automated: "true", "fluxcd.io/automated": "false", "fluxcd.io/tag.app": "semver:~1.2", TagPrefix + "app": "semver:~2"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:~2"},
			warn: `fluxcd.io/tag.app: "semver:~1.2" is overridden by fluxd.io/tag.app: "semver:~2"`},
		{name: "precedence: fluxd's own automation keeps fluxd's default filter beside a Flux v1 lock",
			raw:  map[string]string{Automated: "true", "fluxcd.io/locked": "true"},
			want: map[string]string{Automated: "true", Locked: "true"}},
		{name: "fluxd: own annotations are read as written",
			raw:  map[string]string{Automated: "true", TagAll: "semver:minor", "other/x": "y"},
			want: map[string]string{Automated: "true", TagAll: "semver:minor"}},

		{name: "keel: policy all is any newer version, pre-releases included",
			raw:  map[string]string{KeelPolicy: "all"},
			want: map[string]string{Automated: "true", TagAll: "semver:major", TagPrerelease: "true"}},
		{name: "keel: policy major is any newer version",
			raw:  map[string]string{KeelPolicy: "major"},
			want: map[string]string{Automated: "true", TagAll: "semver:major"}},
		{name: "keel: policy minor keeps the major version",
			raw:  map[string]string{KeelPolicy: "minor"},
			want: map[string]string{Automated: "true", TagAll: "semver:minor"}},
		{name: "keel: policy patch keeps the major and minor versions",
			raw:  map[string]string{KeelPolicy: "patch"},
			want: map[string]string{Automated: "true", TagAll: "semver:patch"}},
		{name: "keel: policy force takes any new tag, a new push of the running tag included (digests pinned)",
			raw:  map[string]string{KeelPolicy: "force"},
			want: map[string]string{Automated: "true", TagAll: "glob:*", PinDigest: "true"}},
		{name: "keel: force with match-tag true follows new pushes of the running tag only",
			raw:  map[string]string{KeelPolicy: "force", KeelMatchTag: "true"},
			want: map[string]string{Automated: "true", PinDigest: "true", FollowTag: "true"}},
		{name: "keel: force with match-tag other than true takes any new tag",
			raw:  map[string]string{KeelPolicy: "force", KeelMatchTag: "false"},
			want: map[string]string{Automated: "true", TagAll: "glob:*", PinDigest: "true"}},
		{name: "precedence: fluxd's own pin-digest false wins over Keel's force, with a warning",
			raw:  map[string]string{KeelPolicy: "force", PinDigest: "false"},
			want: map[string]string{Automated: "true", TagAll: "glob:*", PinDigest: "false"},
			warn: `keel.sh/policy: "force" is overridden by fluxd.io/pin-digest: "false"`},
		{name: "fluxd: pin-digest is read as written",
			raw:  map[string]string{Automated: "true", PinDigest: "true", PinDigestPrefix + "sidecar": "false"},
			want: map[string]string{Automated: "true", PinDigest: "true", PinDigestPrefix + "sidecar": "false"}},
		{name: "keel: match-tag is read only with force",
			raw:  map[string]string{KeelPolicy: "minor", KeelMatchTag: "true"},
			want: map[string]string{Automated: "true", TagAll: "semver:minor"}},
		{name: "keel: glob: is a glob where only * is special",
			raw:  map[string]string{KeelPolicy: "glob:build-*"},
			want: map[string]string{Automated: "true", TagAll: "glob:build-*"}},
		{name: "keel: regexp: is a regular expression",
			raw:  map[string]string{KeelPolicy: "regexp:^([a-zA-Z]+)$"},
			want: map[string]string{Automated: "true", TagAll: "regex:^([a-zA-Z]+)$"}},
		{name: "keel: a bad regexp is the nil policy",
			raw:  map[string]string{KeelPolicy: "regexp:(["},
			want: map[string]string{Automated: "false"},
			warn: "is not a regular expression"},
		{name: "keel: an unknown policy is the nil policy",
			raw:  map[string]string{KeelPolicy: "sometimes"},
			want: map[string]string{Automated: "false"},
			warn: "is not a Keel policy"},
		{name: "precedence: fluxd's own filter wins over Keel's, with a warning",
			raw:  map[string]string{KeelPolicy: "minor", TagAll: "semver:patch"},
			want: map[string]string{Automated: "true", TagAll: "semver:patch"},
			warn: `keel.sh/policy: "minor" is overridden by fluxd.io/tag-all: "semver:patch"`},
		{name: "precedence: Flux v1 wins over Keel, with a warning",
			raw:  map[string]string{KeelPolicy: "minor", "fluxcd.io/automated": "false"},
			want: map[string]string{Automated: "false", TagAll: "semver:minor"},
			warn: `keel.sh/policy: "minor" is overridden by fluxcd.io/automated: "false"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := map[string]string{}
			for k, v := range tc.raw {
				before[k] = v
			}
			got, warnings := Read(tc.raw)
			if diff := cmp.Diff(tc.want, pol(got)); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.raw); diff != "" {
				t.Errorf("Read changed its input (-before +after):\n%s", diff)
			}
			for k, v := range tc.raw {
				if got[k] != v && !strings.HasPrefix(k, "fluxd.io/") {
					t.Errorf("annotation %s = %q was not kept as written (got %q)", k, v, got[k])
				}
			}
			switch {
			case tc.warn == "" && len(warnings) > 0:
				t.Errorf("warnings = %q; want none", warnings)
			case tc.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warn):
				t.Errorf("warnings = %q; want one containing %q", warnings, tc.warn)
			}
			// Every filter read is one fluxd can parse.
			for k, v := range pol(got) {
				if k == TagAll || strings.HasPrefix(k, TagPrefix) {
					if _, err := registry.ParseFilter(v, ""); err != nil {
						t.Errorf("%s = %q does not parse: %v", k, v, err)
					}
				}
			}
		})
	}
}

// The filters read from a peer's patterns pass the tags the peer passed.
func TestReadFiltersMatchLikeThePeer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		raw        map[string]string
		pass, fail []string
	}{
		{name: "flux v1: glob:* passes every tag, latest and commit tags included",
			raw: map[string]string{"fluxcd.io/tag.app": "glob:*"}, pass: []string{"latest", "1.2.3", "main-3f2a1b0", "v2"}},
		{name: "flux v1: no tag filter passes every tag",
			raw: map[string]string{"fluxcd.io/automated": "true"}, pass: []string{"latest", "main-3f2a1b0"}},
		{name: "flux v1: in a glob, ? is a literal character",
			raw: map[string]string{"fluxcd.io/tag.app": "glob:v?"}, fail: []string{"v1", "va"}},
		{name: "flux v1: semver:~1.2 passes 1.2.x only",
			raw: map[string]string{"fluxcd.io/tag.app": "semver:~1.2"}, pass: []string{"1.2.0", "1.2.9"}, fail: []string{"1.3.0", "1.1.9", "latest"}},
		{name: "keel: glob:build-* passes build tags only",
			raw: map[string]string{KeelPolicy: "glob:build-*"}, pass: []string{"build-1", "build-abc"}, fail: []string{"1.0.0", "latest"}},
		{name: "keel: force passes any tag",
			raw: map[string]string{KeelPolicy: "force"}, pass: []string{"latest", "1.0.0", "dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ann, _ := Read(tc.raw)
			pattern := ann[TagPrefix+"app"]
			if pattern == "" {
				pattern = ann[TagAll]
			}
			f, err := registry.ParseFilter(pattern, "")
			if err != nil {
				t.Fatalf("ParseFilter(%q): %v", pattern, err)
			}
			for _, tag := range tc.pass {
				if !f.Match(tag) {
					t.Errorf("%s does not pass %q", f, tag)
				}
			}
			for _, tag := range tc.fail {
				if f.Match(tag) {
					t.Errorf("%s passes %q", f, tag)
				}
			}
		})
	}
}

// Write keeps each policy in the dialect the workload uses.
func TestWriteKeepsTheDialectInUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		raw, set map[string]string
		want     map[string]string
	}{
		{name: "flux v1: fluxctl lock on a fluxcd.io/ workload writes fluxcd.io/locked, locked_msg and locked_user",
			raw:  map[string]string{"fluxcd.io/automated": "true"},
			set:  map[string]string{Locked: "true", LockMessage: "incident 42", LockedBy: "alex", LockedAt: "2026-12-01T15:00:00Z"},
			want: map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_msg": "incident 42", "fluxcd.io/locked_user": "alex", LockedAt: "2026-12-01T15:00:00Z"}},
		{name: "flux v1: the older prefix stays flux.weave.works/",
			raw:  map[string]string{"flux.weave.works/automated": "true"},
			set:  map[string]string{Automated: "", AutomatedBy: ""},
			want: map[string]string{"flux.weave.works/automated": "", AutomatedBy: ""}},
		{name: "flux v1: fluxctl unlock removes the lock and an ignore",
			raw:  map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_msg": "m", "fluxcd.io/ignore": "true"},
			set:  map[string]string{Locked: "", LockMessage: "", LockedBy: "", LockedAt: ""},
			want: map[string]string{"fluxcd.io/locked": "", "fluxcd.io/locked_msg": "", "fluxcd.io/locked_user": "", "fluxcd.io/ignore": "", LockedAt: ""}},
		{name: "flux v1: a semver range stays fluxcd.io/tag.<container>",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "glob:*"},
			set:  map[string]string{TagPrefix + "app": "semver:~1.2"},
			want: map[string]string{"fluxcd.io/tag.app": "semver:~1.2"}},
		{name: "flux v1 cannot say semver:minor: fluxd's own, and the Flux v1 filter goes",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "glob:*"},
			set:  map[string]string{TagPrefix + "app": "semver:minor"},
			want: map[string]string{TagPrefix + "app": "semver:minor", "fluxcd.io/tag.app": ""}},
		{name: "both flux v1 prefixes: written under fluxcd.io/, the older one removed",
			raw:  map[string]string{"fluxcd.io/automated": "true", "flux.weave.works/automated": "true"},
			set:  map[string]string{Automated: ""},
			want: map[string]string{"fluxcd.io/automated": "", "flux.weave.works/automated": ""}},
		{name: "fluxd's own annotation is written where it is, and a disagreeing Flux v1 one removed",
			raw:  map[string]string{Locked: "true", "fluxcd.io/locked": "false"},
			set:  map[string]string{Locked: ""},
			want: map[string]string{Locked: "", "fluxcd.io/locked": ""}},
		{name: "a workload with no annotations gets fluxd's own",
			raw:  map[string]string{},
			set:  map[string]string{Automated: "true", AutomatedBy: "team"},
			want: map[string]string{Automated: "true", AutomatedBy: "team"}},
		{name: "keel: a lock is fluxd's own, keel.sh/policy stays",
			raw:  map[string]string{KeelPolicy: "minor"},
			set:  map[string]string{Locked: "true"},
			want: map[string]string{Locked: "true"}},
		{name: "keel: deautomating moves Keel's filter to fluxd's own",
			raw:  map[string]string{KeelPolicy: "all"},
			set:  map[string]string{Automated: "", AutomatedBy: ""},
			want: map[string]string{KeelPolicy: "", Automated: "", AutomatedBy: "", TagAll: "semver:major", TagPrerelease: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Write(tc.raw, tc.set)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Write (-want +got):\n%s", diff)
			}
			// What is written reads back as the policy asked for.
			after := map[string]string{}
			for k, v := range tc.raw {
				after[k] = v
			}
			for k, v := range got {
				if v == "" {
					delete(after, k)
				} else {
					after[k] = v
				}
			}
			read, warnings := Read(after)
			for k, v := range tc.set {
				if !same(k, v, read[k]) && !(v == "" && (k == TagAll || strings.HasPrefix(k, TagPrefix))) {
					t.Errorf("after writing, %s reads %q; want %q", k, read[k], v)
				}
			}
			if len(warnings) > 0 {
				t.Errorf("after writing, warnings %q; want none", warnings)
			}
		})
	}
}

// Keel reads keel.sh/policy from the annotations, then from the labels
// (GetPolicyFromLabelsOrAnnotations), with keel.sh/match-tag from the
// same place.
func TestReadObjectKeelLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		ann, labels map[string]string
		want        map[string]string
		warn        string
	}{
		{name: "keel: a policy label automates like the annotation",
			labels: map[string]string{KeelPolicy: "minor"},
			want:   map[string]string{Automated: "true", TagAll: "semver:minor"}},
		{name: "keel: the annotation wins over the label",
			ann:    map[string]string{KeelPolicy: "patch"},
			labels: map[string]string{KeelPolicy: "major"},
			want:   map[string]string{Automated: "true", TagAll: "semver:patch"}},
		{name: "keel: match-tag is read from the labels with a policy label",
			ann:    map[string]string{KeelMatchTag: "false"},
			labels: map[string]string{KeelPolicy: "force", KeelMatchTag: "true"},
			want:   map[string]string{Automated: "true", PinDigest: "true", FollowTag: "true"}},
		{name: "keel: a bad policy label says it is a label",
			labels: map[string]string{KeelPolicy: "sometimes"},
			want:   map[string]string{Automated: "false"},
			warn:   `keel.sh/policy (a label): "sometimes" is not a Keel policy`},
		{name: "keel: labels without a policy change nothing",
			labels: map[string]string{"app": "web"},
			want:   map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, warnings := ReadObject(tc.ann, tc.labels)
			if diff := cmp.Diff(tc.want, pol(got)); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if _, ok := got[KeelPolicy]; ok && tc.ann[KeelPolicy] == "" {
				t.Errorf("the label %s shows among the annotations: %v", KeelPolicy, got)
			}
			if v, ok := tc.ann[KeelMatchTag]; ok && got[KeelMatchTag] != v {
				t.Errorf("annotation %s = %q not kept (got %q)", KeelMatchTag, v, got[KeelMatchTag])
			}
			switch {
			case tc.warn == "" && len(warnings) > 0:
				t.Errorf("warnings = %q; want none", warnings)
			case tc.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warn):
				t.Errorf("warnings = %q; want one containing %q", warnings, tc.warn)
			}
		})
	}
}

// A pin on one container wins over the workload's.
func TestPinned(t *testing.T) {
	t.Parallel()
	ann := map[string]string{PinDigest: "true", PinDigestPrefix + "sidecar": "false", PinDigestPrefix + "web": "true"}
	for c, want := range map[string]bool{"app": true, "sidecar": false, "web": true} {
		if got := Pinned(ann, c); got != want {
			t.Errorf("Pinned(%s) = %v; want %v", c, got, want)
		}
	}
	if Pinned(map[string]string{PinDigestPrefix + "web": "true"}, "app") {
		t.Error("a pin on web pins app")
	}
}

// Flux v1's FAQ: ignore "true" (git or cluster) leaves an object out of
// the sync and of garbage collection; "sync_only" out of garbage
// collection only; any other value is no ignore.
func TestFluxIgnore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ann        map[string]string
		value, key string
	}{
		{map[string]string{"fluxcd.io/ignore": "true"}, "true", "fluxcd.io/ignore"},
		{map[string]string{"flux.weave.works/ignore": "sync_only"}, "sync_only", "flux.weave.works/ignore"},
		{map[string]string{"fluxcd.io/ignore": "false"}, "", ""},
		{map[string]string{"fluxcd.io/ignore": "yes"}, "", ""},
		{map[string]string{"ignore": "true"}, "", ""},
	} {
		if v, k := FluxIgnore(tc.ann); v != tc.value || k != tc.key {
			t.Errorf("FluxIgnore(%v) = %q, %q; want %q, %q", tc.ann, v, k, tc.value, tc.key)
		}
	}
}

// fluxd.io/verify is honoured (release verifies by it): no warning, but
// one for a container the object does not have, or none named.
func TestVerifyAnnotationsAreRead(t *testing.T) {
	t.Parallel()
	obj := Object{Containers: []string{"app"}}
	if w := Unhonoured(map[string]string{Verify: "signed", VerifyPrefix + "app": "ci"}, obj); len(w) != 0 {
		t.Errorf("warnings %q; want none", w)
	}
	for key, want := range map[string]string{
		VerifyPrefix + "ap": `fluxd.io/verify.ap names the container "ap", which this object does not have`,
		VerifyPrefix:        "fluxd.io/verify. names no container",
		"fluxd.io/verfy":    "fluxd.io/verfy is not one of fluxd's annotations",
	} {
		if w := Unhonoured(map[string]string{key: "signed"}, obj); len(w) != 1 || !strings.Contains(w[0], want) {
			t.Errorf("%s: warnings %q; want one saying %q", key, w, want)
		}
	}
}

// One case per annotation Flux v1 documents (its fluxctl reference, its
// "automated image update" reference and its Helm operator guide), named
// after it: what fluxd reads it as, and what it says of it. A case with
// no warn expects no warning at all, from Read or from Unhonoured.
func TestFluxV1DocumentedAnnotations(t *testing.T) {
	t.Parallel()
	deployment := Object{Containers: []string{"app", "sidecar"}}
	helm := Object{HelmRelease: true, Containers: []string{"chart-image", "app"}}
	for _, tc := range []struct {
		name string
		raw  map[string]string
		obj  Object
		want map[string]string
		// warn is a part of the one warning expected.
		warn string
	}{
		{name: "fluxcd.io/automated",
			raw:  map[string]string{"fluxcd.io/automated": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "fluxcd.io/locked",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/locked": "true"},
			want: map[string]string{Automated: "true", Locked: "true", TagAll: "glob:*"}},
		{name: "fluxcd.io/locked_msg",
			raw:  map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_msg": "incident 42"},
			want: map[string]string{Locked: "true", LockMessage: "incident 42", TagAll: "glob:*"}},
		{name: "fluxcd.io/locked_user",
			raw:  map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_user": "Jane Doe <jane@doe.com>"},
			want: map[string]string{Locked: "true", LockedBy: "Jane Doe <jane@doe.com>", TagAll: "glob:*"}},
		{name: "fluxcd.io/ignore",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/ignore": "true"},
			want: map[string]string{Automated: "true", Locked: "true", LockMessage: `ignored (fluxcd.io/ignore: "true")`, TagAll: "glob:*"}},
		{name: "fluxcd.io/ignore sync_only",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/ignore": "sync_only"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "fluxcd.io/tag.<container>",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "semver:~1.0"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:~1.0", TagAll: "glob:*"}},
		{name: "fluxcd.io/tag.<container> naming no container",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.ap": "semver:~1.0"},
			want: map[string]string{Automated: "true", TagPrefix + "ap": "semver:~1.0", TagAll: "glob:*"},
			warn: `fluxcd.io/tag.ap names the container "ap", which this object does not have (its containers are app, sidecar)`},
		{name: "filter.fluxcd.io/<container>",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:~4.0", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> glob:",
			raw:  map[string]string{"filter.fluxcd.io/app": "glob:master-*"},
			want: map[string]string{TagPrefix + "app": "glob:master-*", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> with no prefix is a glob",
			raw:  map[string]string{"filter.fluxcd.io/app": "prod-*"},
			want: map[string]string{TagPrefix + "app": "glob:prod-*", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> regexp: and its alias regex:",
			raw:  map[string]string{"filter.fluxcd.io/app": "regexp:^([a-zA-Z]+)$", "filter.fluxcd.io/sidecar": "regex:^stg.*"},
			want: map[string]string{TagPrefix + "app": "regex:^([a-zA-Z]+)$", TagPrefix + "sidecar": "regex:^stg.*", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> semver:* (stable versions only)",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:*"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:*", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> naming no container",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/web": "semver:~4.0"},
			want: map[string]string{Automated: "true", TagPrefix + "web": "semver:~4.0", TagAll: "glob:*"},
			warn: `filter.fluxcd.io/web names the container "web", which this object does not have`},
		{name: "filter.fluxcd.io/ with no container",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/": "semver:~4.0"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"},
			warn: "filter.fluxcd.io/ names no container"},
		{name: "filter.fluxcd.io/<container> disagreeing with fluxcd.io/tag.<container>",
			raw:  map[string]string{"fluxcd.io/tag.app": "semver:~4.0", "filter.fluxcd.io/app": "glob:*"},
			want: map[string]string{TagPrefix + "app": "semver:~4.0", TagAll: "glob:*"},
			warn: `filter.fluxcd.io/app: "glob:*" is overridden by fluxcd.io/tag.app: "semver:~4.0"`},
		{name: "filter.fluxcd.io/<container> agreeing with fluxcd.io/tag.<container>",
			raw:  map[string]string{"fluxcd.io/tag.app": "semver:~4.0", "filter.fluxcd.io/app": "semver:~4.0"},
			want: map[string]string{TagPrefix + "app": "semver:~4.0", TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/<container> disagreeing with flux.weave.works/tag.<container>",
			raw:  map[string]string{"flux.weave.works/automated": "true", "flux.weave.works/tag.app": "glob:*", "filter.fluxcd.io/app": "semver:~4.0"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "semver:~4.0", TagAll: "glob:*"},
			warn: `flux.weave.works/tag.app: "glob:*" is overridden by filter.fluxcd.io/app: "semver:~4.0"`},
		{name: "fluxcd.io/sync-checksum",
			raw:  map[string]string{"fluxcd.io/sync-checksum": "0123abcd"},
			want: map[string]string{}},
		{name: "fluxcd.io/sync-gc-mark",
			raw:  map[string]string{"fluxcd.io/sync-gc-mark": "sha256.abc"},
			want: map[string]string{}},
		{name: "fluxcd.io/<anything else>",
			raw:  map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/automate": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"},
			warn: "Flux v1's fluxcd.io/automate is not read by fluxd"},
		{name: "flux.weave.works/automated",
			raw:  map[string]string{"flux.weave.works/automated": "true"},
			want: map[string]string{Automated: "true", TagAll: "glob:*"}},
		{name: "flux.weave.works/locked",
			raw:  map[string]string{"flux.weave.works/locked": "true"},
			want: map[string]string{Locked: "true", TagAll: "glob:*"}},
		{name: "flux.weave.works/locked_msg",
			raw:  map[string]string{"flux.weave.works/locked": "true", "flux.weave.works/locked_msg": "freeze"},
			want: map[string]string{Locked: "true", LockMessage: "freeze", TagAll: "glob:*"}},
		{name: "flux.weave.works/locked_user",
			raw:  map[string]string{"flux.weave.works/locked": "true", "flux.weave.works/locked_user": "phil"},
			want: map[string]string{Locked: "true", LockedBy: "phil", TagAll: "glob:*"}},
		{name: "flux.weave.works/tag.<container>",
			raw:  map[string]string{"flux.weave.works/automated": "true", "flux.weave.works/tag.sidecar": "regex:^stg.*"},
			want: map[string]string{Automated: "true", TagPrefix + "sidecar": "regex:^stg.*", TagAll: "glob:*"}},
		{name: "flux.weave.works/ignore",
			raw:  map[string]string{"flux.weave.works/ignore": "true"},
			want: map[string]string{Locked: "true", LockMessage: `ignored (flux.weave.works/ignore: "true")`, TagAll: "glob:*"}},
		{name: "filter.fluxcd.io/chart-image on a HelmRelease",
			obj:  helm,
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/chart-image": "semver:~4.0"},
			want: map[string]string{Automated: "true", TagPrefix + "chart-image": "semver:~4.0", TagAll: "glob:*"}},
		{name: "repository.fluxcd.io/<container> with tag.fluxcd.io/ and registry.fluxcd.io/ on a HelmRelease",
			obj: helm,
			raw: map[string]string{"fluxcd.io/automated": "true", "repository.fluxcd.io/app": "appImage", "tag.fluxcd.io/app": "appTag",
				"registry.fluxcd.io/app": "sub.reg", "filter.fluxcd.io/app": "glob:*"},
			want: map[string]string{Automated: "true", TagPrefix + "app": "glob:*", TagAll: "glob:*"}},
		{name: "tag.fluxcd.io/<container> without repository.fluxcd.io/<container>",
			obj:  helm,
			raw:  map[string]string{"tag.fluxcd.io/app": "appTag"},
			want: map[string]string{},
			warn: "tag.fluxcd.io/app does nothing without repository.fluxcd.io/app"},
		{name: "registry.fluxcd.io/<container> without repository.fluxcd.io/<container>",
			obj:  helm,
			raw:  map[string]string{"registry.fluxcd.io/app": "sub.reg"},
			want: map[string]string{},
			warn: "registry.fluxcd.io/app does nothing without repository.fluxcd.io/app"},
		{name: "repository.fluxcd.io/<container> on a Deployment",
			raw:  map[string]string{"repository.fluxcd.io/app": "appImage"},
			want: map[string]string{},
			warn: "Flux v1's repository.fluxcd.io/app maps an image in a HelmRelease's values; on this kind it does nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj := tc.obj
			if obj.Containers == nil {
				obj = deployment
			}
			got, warnings := Read(tc.raw)
			warnings = append(warnings, Unhonoured(tc.raw, obj)...)
			if diff := cmp.Diff(tc.want, pol(got)); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			switch {
			case tc.warn == "" && len(warnings) > 0:
				t.Errorf("warnings = %q; want none", warnings)
			case tc.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warn)):
				t.Errorf("warnings = %q; want one, containing %q", warnings, tc.warn)
			}
			for k, v := range pol(got) {
				if k == TagAll || strings.HasPrefix(k, TagPrefix) {
					if _, err := registry.ParseFilter(v, ""); err != nil {
						t.Errorf("%s = %q does not parse: %v", k, v, err)
					}
				}
			}
			if len(Dialects(tc.raw, nil)) == 0 && strings.Contains(strings.Join(keys(tc.raw), " "), "fluxcd.io/automated") {
				t.Errorf("Dialects(%v) is empty", tc.raw)
			}
		})
	}
}

// The case: a workload automated by fluxcd.io/automated with
// filter.fluxcd.io/app: semver:~4.0 is held to 4.0.x, as in Flux v1.
func TestFluxV1FilterHoldsTheMajorVersion(t *testing.T) {
	t.Parallel()
	ann, _ := Read(map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"})
	f, err := registry.ParseFilter(ann[TagPrefix+"app"], "")
	if err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]bool{"4.0.1": true, "4.0.2": true, "4.1.0": false, "5.0.0": false, "latest": false} {
		if f.Match(tag) != want {
			t.Errorf("%s passes %s: %v; want %v", f, tag, !want, want)
		}
	}
	if got := Dialects(map[string]string{"filter.fluxcd.io/app": "semver:~4.0"}, nil); !cmp.Equal(got, []string{DialectFluxV1}) {
		t.Errorf("Dialects of a filter.fluxcd.io/ workload = %q; want flux-v1", got)
	}
}

// Write keeps Flux v1's filter in the form the workload writes it in, as
// Flux v1's PolicyAnnotationKey did: an existing annotation is updated,
// never joined by a second one of another form.
func TestWriteFluxV1FilterForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		raw, set map[string]string
		want     map[string]string
	}{
		{name: "filter.fluxcd.io/<container> is updated where it is",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": "semver:~5.0"},
			want: map[string]string{"filter.fluxcd.io/app": "semver:~5.0"}},
		{name: "filter.fluxcd.io/<container> alone makes a fluxcd.io/ workload",
			raw:  map[string]string{"filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{Automated: "true", AutomatedBy: "team"},
			want: map[string]string{"fluxcd.io/automated": "true", AutomatedBy: "team"}},
		{name: "a new filter takes the filter.fluxcd.io/ form the workload uses",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "sidecar": "glob:stg-*"},
			want: map[string]string{"filter.fluxcd.io/sidecar": "glob:stg-*"}},
		{name: "a new filter takes the fluxcd.io/tag. form when the workload uses both",
			raw:  map[string]string{"fluxcd.io/tag.web": "glob:*", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "sidecar": "glob:stg-*"},
			want: map[string]string{"fluxcd.io/tag.sidecar": "glob:stg-*"}},
		{name: "fluxcd.io/tag.<container> is updated where it is, beside filter.fluxcd.io/ of others",
			raw:  map[string]string{"fluxcd.io/tag.app": "semver:~4.0", "filter.fluxcd.io/sidecar": "glob:*"},
			set:  map[string]string{TagPrefix + "app": "semver:~5.0"},
			want: map[string]string{"fluxcd.io/tag.app": "semver:~5.0"}},
		{name: "both forms of one filter: filter.fluxcd.io/ is kept, the other removed",
			raw:  map[string]string{"fluxcd.io/tag.app": "glob:*", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": "semver:~4.1"},
			want: map[string]string{"filter.fluxcd.io/app": "semver:~4.1", "fluxcd.io/tag.app": ""}},
		{name: "filter.fluxcd.io/<container> on a flux.weave.works/ workload is updated where it is",
			raw:  map[string]string{"flux.weave.works/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": "regex:^v4"},
			want: map[string]string{"filter.fluxcd.io/app": "regex:^v4"}},
		{name: "clearing the filter removes filter.fluxcd.io/<container>",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": ""},
			want: map[string]string{"filter.fluxcd.io/app": ""}},
		{name: "flux v1 cannot say semver:minor: fluxd's own, and filter.fluxcd.io/<container> goes",
			raw:  map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": "semver:minor"},
			want: map[string]string{TagPrefix + "app": "semver:minor", "filter.fluxcd.io/app": ""}},
		{name: "fluxd's own filter is written where it is, and filter.fluxcd.io/<container> removed",
			raw:  map[string]string{TagPrefix + "app": "semver:~3", "filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{TagPrefix + "app": "semver:~5"},
			want: map[string]string{TagPrefix + "app": "semver:~5", "filter.fluxcd.io/app": ""}},
		{name: "fluxctl lock on a filter.fluxcd.io/ workload writes fluxcd.io/locked",
			raw:  map[string]string{"filter.fluxcd.io/app": "semver:~4.0"},
			set:  map[string]string{Locked: "true", LockMessage: "hold", LockedBy: "dana"},
			want: map[string]string{"fluxcd.io/locked": "true", "fluxcd.io/locked_msg": "hold", "fluxcd.io/locked_user": "dana"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Write(tc.raw, tc.set)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Write (-want +got):\n%s", diff)
			}
			after := map[string]string{}
			for k, v := range tc.raw {
				after[k] = v
			}
			for k, v := range got {
				if v == "" {
					delete(after, k)
				} else {
					after[k] = v
				}
			}
			read, warnings := Read(after)
			for k, v := range tc.set {
				if !same(k, v, read[k]) && !(v == "" && (k == TagAll || strings.HasPrefix(k, TagPrefix))) {
					t.Errorf("after writing, %s reads %q; want %q", k, read[k], v)
				}
			}
			if len(warnings) > 0 {
				t.Errorf("after writing, warnings %q; want none", warnings)
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

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
