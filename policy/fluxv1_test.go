package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/registry"
)

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
