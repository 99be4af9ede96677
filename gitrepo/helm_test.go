package gitrepo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

// helmRelease is a Flux v2 HelmRelease named hr with spec lines spec.
func helmRelease(spec string) string {
	return "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr # keep\n  namespace: apps\nspec:\n  chart: {spec: {chart: app}}\n" + spec + "  # after\n"
}

var hrID = platform.ID{Namespace: "apps", Kind: platform.KindHelmRelease, Name: "hr"}

// setHelmWant sets, in the decoded object w, the values SetImages should
// have written for images (container → new image), by the same rules.
func setHelmWant(before []byte, id platform.ID, w map[string]any, images map[string]string) error {
	wl, err := findWorkload(before, id)
	if err != nil {
		return err
	}
	changes := map[string]ImageChange{}
	imgs, _ := helmImages(wl.obj)
	for _, img := range imgs {
		if to, ok := images[img.Name]; ok {
			changes[img.Name] = ImageChange{From: img.Ref, To: to}
		}
	}
	_, values, err := helmEdits(before, wl, id, changes)
	if err != nil {
		return err
	}
	return setHelmValues(w, values)
}

func TestParseHelmRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []Container
		id       platform.ID
		none     bool
	}{
		{name: "fluxv2 HelmRelease is a service, helmrelease/NAME",
			in:   helmRelease("  values:\n    image: reg/app:1\n    backend:\n      image: {repository: reg/api, tag: \"2\"}\n"),
			id:   hrID,
			want: []Container{{Name: "backend", Image: "reg/api:2"}, {Name: "chart-image", Image: "reg/app:1"}}},
		{name: "fluxv1 helm.fluxcd.io/v1 HelmRelease, default namespace",
			in:   "apiVersion: helm.fluxcd.io/v1\nkind: HelmRelease\nmetadata: {name: old}\nspec:\n  values:\n    image:\n      repository: reg/app\n      tag: v3\n",
			id:   platform.ID{Namespace: "default", Kind: platform.KindHelmRelease, Name: "old"},
			want: []Container{{Name: "chart-image", Image: "reg/app:v3"}}},
		{name: "a HelmRelease of another API group is not a service",
			in:   "apiVersion: example.com/v1\nkind: HelmRelease\nmetadata: {name: x}\nspec: {values: {image: a:1}}\n",
			none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defs, err := ParseFile("hr.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if len(defs) != 0 {
					t.Fatalf("found %v, want nothing", defs[0].ID)
				}
				return
			}
			if len(defs) != 1 || defs[0].ID != tc.id {
				t.Fatalf("found %d definitions (%v), want %v", len(defs), defs, tc.id)
			}
			if diff := cmp.Diff(tc.want, defs[0].Containers); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetHelmImages edits HelmRelease values in the forms Flux v1's
// helm-operator documented, and checks the exact bytes: only the values
// change, comments and quoting stay.
func TestSetHelmImages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, container, image, want string
	}{
		{name: "string image", container: "chart-image", image: "reg/app:2",
			values: "    image: reg/app:1 # pinned\n", want: "    image: reg/app:2 # pinned\n"},
		{name: "string image with sibling tag", container: "web", image: "reg/web:1.10",
			values: "    web:\n      image: reg/web\n      tag: \"1.9\" # the tag\n", want: "    web:\n      image: reg/web\n      tag: \"1.10\" # the tag\n"},
		{name: "repository and tag, single-quoted", container: "chart-image", image: "bitnami/redis:7.4.1",
			values: "    image:\n      repository: bitnami/redis\n      tag: '7.2.4'\n", want: "    image:\n      repository: bitnami/redis\n      tag: '7.4.1'\n"},
		{name: "registry, repository and tag in flow style", container: "backend", image: "reg.io/team/api:v2",
			values: "    backend: {image: {registry: reg.io, repository: team/api, tag: v1}}\n", want: "    backend: {image: {registry: reg.io, repository: team/api, tag: v2}}\n"},
		{name: "registry changes with the image", container: "chart-image", image: "127.0.0.1:5000/team/api:v2",
			values: "    image:\n      registry: docker.io\n      repository: team/api\n      tag: v1\n", want: "    image:\n      registry: 127.0.0.1:5000\n      repository: team/api\n      tag: v2\n"},
		{name: "a number-like tag is written quoted, as a string", container: "chart-image", image: "app:1.10",
			values: "    image:\n      repository: app\n      tag: 1.9.0\n", want: "    image:\n      repository: app\n      tag: \"1.10\"\n"},
		{name: "deep image, block scalar written double-quoted", container: "a.b", image: "reg/deep:2",
			values: "    a:\n      b:\n        image: |-\n          reg/deep:1\n", want: "    a:\n      b:\n        image: \"reg/deep:2\"\n"},
		{name: "an image in a list item", container: "sidecars.1", image: "fluent/fluent-bit:3.1",
			values: "    sidecars:\n      - name: proxy\n        image: envoyproxy/envoy:v1.30.1\n      - name: log # ships logs\n        image: {repository: fluent/fluent-bit, tag: \"3.0\"}\n",
			want:   "    sidecars:\n      - name: proxy\n        image: envoyproxy/envoy:v1.30.1\n      - name: log # ships logs\n        image: {repository: fluent/fluent-bit, tag: \"3.1\"}\n"},
		{name: "an image merged from an anchor no other container uses is edited where the anchor is defined", container: "web", image: "team/web:2",
			values: "    x-defaults: &d\n      replicas: 2\n    web:\n      <<: *d\n      image: team/web:1\n",
			want:   "    x-defaults: &d\n      replicas: 2\n    web:\n      <<: *d\n      image: team/web:2\n"},
		{name: "an anchored tag is edited where it is defined", container: "web", image: "team/web:1.5",
			values: "    version: &v \"1.4\" # the app's\n    web:\n      image: {repository: team/web, tag: *v}\n",
			want:   "    version: &v \"1.5\" # the app's\n    web:\n      image: {repository: team/web, tag: *v}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := helmRelease("  values:\n" + tc.values)
			out, err := SetImages([]byte(in), hrID, planned([]byte(in), hrID, map[string]string{tc.container: tc.image}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(helmRelease("  values:\n"+tc.want), string(out)); diff != "" {
				t.Errorf("SetImages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetHelmImagesRefuses(t *testing.T) {
	t.Parallel()
	in := helmRelease("  values:\n    image: {repository: app, tag: \"1\"}\n")
	for _, tc := range []struct {
		name    string
		changes map[string]ImageChange
		err     string
	}{
		{"another image in git", map[string]ImageChange{"chart-image": {From: "app:0", To: "app:2"}}, "someone changed it"},
		{"no such container", map[string]ImageChange{"web": {From: "app:1", To: "app:2"}}, `no container "web"`},
		{"a digest where values keep a tag", map[string]ImageChange{"chart-image": {From: "app:1", To: "app@sha256:" + strings.Repeat("a", 64)}}, "has no tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := SetImages([]byte(in), hrID, tc.changes)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("SetImages error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestHelmAnnotations: lock and automate write annotations on a
// HelmRelease as on any workload, read through the policy package.
func TestHelmAnnotations(t *testing.T) {
	t.Parallel()
	in := helmRelease("  values:\n    image: reg/app:1\n")
	in = strings.Replace(in, "  name: hr # keep\n", "  name: hr # keep\n  annotations:\n    fluxcd.io/automated: \"true\"\n", 1)
	defs, err := ParseFile("f.yaml", []byte(in))
	if err != nil || len(defs) != 1 {
		t.Fatal(defs, err)
	}
	if got := fmt.Sprint(defs[0].Annotations); !strings.Contains(got, "automated") {
		t.Errorf("Flux v1 annotations of a HelmRelease read as %s, want fluxd's automated", got)
	}
	out, err := SetAnnotations([]byte(in), hrID, map[string]string{"fluxd.io/locked": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "fluxd.io/locked: \"true\"") {
		t.Errorf("lock not written:\n%s", out)
	}
}

// TestCheckRenderHelm: the one check every commit passes knows a
// HelmRelease's images: the planned change passes, another one fails.
func TestCheckRenderHelm(t *testing.T) {
	t.Parallel()
	in := helmRelease("  values:\n    image: {registry: reg.io, repository: team/app, tag: \"1\"}\n")
	out, err := SetImages([]byte(in), hrID, map[string]ImageChange{"chart-image": {From: "reg.io/team/app:1", To: "reg.io/team/app:2"}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ParseObjects("hr.yaml", []byte(in))
	after, _ := ParseObjects("hr.yaml", out)
	planned := Change{Workload: hrID, Container: "chart-image", From: "reg.io/team/app:1", To: "reg.io/team/app:2"}
	if err := CheckRender(&Objects{Objects: before}, &Objects{Objects: after}, []Change{planned}); err != nil {
		t.Errorf("the planned change is refused: %v", err)
	}
	other := planned
	other.To = "reg.io/team/app:3"
	if err := CheckRender(&Objects{Objects: before}, &Objects{Objects: after}, []Change{other}); !IsRenderError(err) {
		t.Errorf("a commit unlike its plan passes: %v", err)
	}
}

// TestSetHelmImagesAnchors: an image reached through a YAML alias is
// written where its anchor is defined, once, and only when every alias
// agrees; otherwise nothing is written and the error names both paths.
func TestSetHelmImagesAnchors(t *testing.T) {
	t.Parallel()
	shared := "    x-app: &app\n      image: {repository: team/app, tag: \"1\"}\n    web:\n      <<: *app\n    worker:\n      <<: *app\n"
	for _, tc := range []struct {
		name   string
		images map[string]string
		want   string // the values after, or "" when refused
		err    []string
	}{
		{name: "every alias moves to the same image: the anchor is edited once",
			images: map[string]string{"web": "team/app:2", "worker": "team/app:2"},
			want:   "    x-app: &app\n      image: {repository: team/app, tag: \"2\"}\n    web:\n      <<: *app\n    worker:\n      <<: *app\n"},
		{name: "two aliases want different images: refused, naming both",
			images: map[string]string{"web": "team/app:2", "worker": "team/app:3"},
			err:    []string{"values.web.image.tag", "values.worker.image.tag", "through a YAML anchor", "values.x-app.image.tag", `"2"`, `"3"`}},
		{name: "one alias moves and another would follow silently: refused",
			images: map[string]string{"web": "team/app:2"},
			err:    []string{"values.web.image.tag is also values.worker.image.tag", "no container of this release agrees"}},
		{name: "a shared repository with different tags is no conflict when the tags are not shared",
			images: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.images == nil {
				in := helmRelease("  values:\n    x-repo: &r team/app\n    web: {image: {repository: *r, tag: \"1\"}}\n    worker: {image: {repository: *r, tag: \"1\"}}\n")
				out, err := SetImages([]byte(in), hrID, planned([]byte(in), hrID, map[string]string{"web": "team/app:2", "worker": "team/app:3"}))
				if err != nil {
					t.Fatal(err)
				}
				want := helmRelease("  values:\n    x-repo: &r team/app\n    web: {image: {repository: *r, tag: \"2\"}}\n    worker: {image: {repository: *r, tag: \"3\"}}\n")
				if diff := cmp.Diff(want, string(out)); diff != "" {
					t.Errorf("SetImages (-want +got):\n%s", diff)
				}
				return
			}
			in := helmRelease("  values:\n" + shared)
			out, err := SetImages([]byte(in), hrID, planned([]byte(in), hrID, tc.images))
			if tc.want != "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(helmRelease("  values:\n"+tc.want), string(out)); diff != "" {
					t.Errorf("SetImages (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("SetImages wrote:\n%s\nwant a refusal", out)
			}
			for _, w := range tc.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// An anchor defined outside spec.values is read, but not written: its
// other uses are out of fluxd's sight.
func TestSetHelmImagesAnchorOutsideValues(t *testing.T) {
	t.Parallel()
	in := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr\n  namespace: apps\n  labels: {version: &v \"1\"}\nspec:\n  values:\n    image: {repository: team/app, tag: *v}\n"
	defs, err := ParseFile("hr.yaml", []byte(in))
	if err != nil || len(defs) != 1 || len(defs[0].Containers) != 1 || defs[0].Containers[0].Image != "team/app:1" {
		t.Fatalf("ParseFile: %v %+v", err, defs)
	}
	_, err = SetImages([]byte(in), hrID, map[string]ImageChange{"chart-image": {From: "team/app:1", To: "team/app:2"}})
	if err == nil || !strings.Contains(err.Error(), "anchor defined outside spec.values") {
		t.Fatalf("SetImages error %v, want a refusal naming the anchor outside spec.values", err)
	}
}
