package helmrelease

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// found is what a test compares: container name, image, and the paths of
// the fields a release writes.
type found struct {
	Name, Ref string
	Paths     []string
}

func values(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var d yaml.Node
	if err := yaml.Unmarshal([]byte(src), &d); err != nil {
		t.Fatal(err)
	}
	return d.Content[0]
}

func summary(imgs []Image) []found {
	var out []found
	for _, img := range imgs {
		f := found{Name: img.Name, Ref: img.Ref}
		for _, fl := range img.Fields() {
			f.Paths = append(f.Paths, strings.Join(fl.Path, "."))
		}
		out = append(out, f)
	}
	return out
}

// TestFind holds the rules of Flux v1's helm-operator integration
// ("Automated image updates" of HelmReleases), one case per rule, and
// fluxd's extension of them to any depth.
func TestFind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		values      string
		want        []found
		warn        string
	}{
		{name: "fluxv1/top-level image is container chart-image",
			values: "image: repo/app:1.0\n",
			want:   []found{{"chart-image", "repo/app:1.0", []string{"image"}}}},
		{name: "fluxv1/top-level image with a sibling tag",
			values: "image: repo/app\ntag: \"1.0\"\n",
			want:   []found{{"chart-image", "repo/app:1.0", []string{"image", "tag"}}}},
		{name: "fluxv1/a key holding image is a container named after the key",
			values: "backend:\n  image: reg.io/team/api:2.1\n  replicas: 2\n",
			want:   []found{{"backend", "reg.io/team/api:2.1", []string{"backend.image"}}}},
		{name: "fluxv1/image mapping with repository and tag",
			values: "image:\n  repository: bitnami/redis\n  tag: 7.2.4\n  pullPolicy: IfNotPresent\n",
			want:   []found{{"chart-image", "bitnami/redis:7.2.4", []string{"image.repository", "image.tag"}}}},
		{name: "fluxv1/image mapping with registry, repository and tag",
			values: "image:\n  registry: docker.io\n  repository: bitnami/redis\n  tag: 7.2.4\n",
			want:   []found{{"chart-image", "docker.io/bitnami/redis:7.2.4", []string{"image.registry", "image.repository", "image.tag"}}}},
		{name: "fluxv1/image mapping with a repository holding the tag",
			values: "image:\n  repository: bitnami/redis:7.2.4\n",
			want:   []found{{"chart-image", "bitnami/redis:7.2.4", []string{"image.repository"}}}},
		{name: "fluxv1/image mapping with registry and a repository holding the tag",
			values: "image:\n  registry: quay.io\n  repository: team/app:1.0\n",
			want:   []found{{"chart-image", "quay.io/team/app:1.0", []string{"image.registry", "image.repository"}}}},
		{name: "fluxv1/mapping without repository is no image",
			values: "image:\n  tag: \"1.0\"\n",
			want:   nil},
		{name: "fluxv1/a number tag is not a string, so no image",
			values: "image:\n  repository: app\n  tag: 1.0\n",
			want:   []found{{"chart-image", "app", []string{"image.repository"}}}},
		{name: "fluxv1/annotations map repository, tag and registry paths",
			annotations: map[string]string{
				"repository.fluxcd.io/app": "app.img.name",
				"tag.fluxcd.io/app":        "app.img.version",
				"registry.fluxcd.io/app":   "app.img.host",
			},
			values: "app:\n  img:\n    host: reg.io\n    name: team/app\n    version: v3\n",
			want:   []found{{"app", "reg.io/team/app:v3", []string{"app.img.host", "app.img.name", "app.img.version"}}}},
		{name: "fluxv1/annotations map a repository alone",
			annotations: map[string]string{"repository.fluxcd.io/sidecar": "sidecarImage"},
			values:      "sidecarImage: envoyproxy/envoy:v1.30.1\n",
			want:        []found{{"sidecar", "envoyproxy/envoy:v1.30.1", []string{"sidecarImage"}}}},
		{name: "fluxv1/an annotation to a missing path warns",
			annotations: map[string]string{"repository.fluxcd.io/app": "nothere.repo"},
			values:      "x: 1\n",
			warn:        "spec.values has no nothere"},
		{name: "fluxv1/a mapped path wins over the same image found by its form",
			annotations: map[string]string{"repository.fluxcd.io/web": "frontend.image.repository", "tag.fluxcd.io/web": "frontend.image.tag"},
			values:      "frontend:\n  image:\n    repository: web\n    tag: \"1\"\n",
			want:        []found{{"web", "web:1", []string{"frontend.image.repository", "frontend.image.tag"}}}},
		{name: "fluxd/images at any depth are named by their dotted keys",
			values: "backend:\n  worker:\n    image: {repository: team/worker, tag: \"5\"}\nfrontend:\n  image: team/web:4\n",
			want: []found{
				{"backend.worker", "team/worker:5", []string{"backend.worker.image.repository", "backend.worker.image.tag"}},
				{"frontend", "team/web:4", []string{"frontend.image"}},
			}},
		{name: "yaml/an alias and a merge key are copies of the anchor, as Helm reads them",
			values: "base: &b\n  image: team/a:1\nother:\n  <<: *b\ncopy: *b\n",
			want: []found{
				{"base", "team/a:1", []string{"base.image"}},
				{"copy", "team/a:1", []string{"copy.image"}},
				{"other", "team/a:1", []string{"other.image"}},
			}},
		{name: "yaml/an entry written beside a merge key wins over the merged one",
			values: "defaults: &d\n  image: {repository: team/a, tag: \"1\"}\nworker:\n  <<: *d\n  image: {repository: team/w, tag: \"2\"}\n",
			want: []found{
				{"defaults", "team/a:1", []string{"defaults.image.repository", "defaults.image.tag"}},
				{"worker", "team/w:2", []string{"worker.image.repository", "worker.image.tag"}},
			}},
		{name: "yaml/an aliased tag scalar",
			values: "version: &v \"1.4\"\nweb:\n  image: {repository: team/web, tag: *v}\n",
			want:   []found{{"web", "team/web:1.4", []string{"web.image.repository", "web.image.tag"}}}},
		{name: "fluxd/images in a list are named by the list and the item's index",
			values: "sidecars:\n  - name: proxy\n    image: envoyproxy/envoy:v1.30.1\n  - name: log\n    image: {repository: fluent/fluent-bit, tag: \"3.0\"}\n",
			want: []found{
				{"sidecars.0", "envoyproxy/envoy:v1.30.1", []string{"sidecars.0.image"}},
				{"sidecars.1", "fluent/fluent-bit:3.0", []string{"sidecars.1.image.repository", "sidecars.1.image.tag"}},
			}},
		{name: "fluxd/images in a list nested in a mapping, in flow style",
			values: "extra: {containers: [{image: team/x:1}]}\n",
			want:   []found{{"extra.containers.0", "team/x:1", []string{"extra.containers.0.image"}}}},
		{name: "yaml/a billion laughs costs a bounded walk",
			values: "a: &a {image: team/a:1}\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			want:   nil, warn: "reads no image"},
		{name: "fluxd/a value that is not an image reference is left alone",
			values: "image: \"not an image\"\n",
			want:   nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			imgs, warnings := Find(tc.annotations, values(t, tc.values))
			if diff := cmp.Diff(tc.want, summary(imgs)); diff != "" {
				t.Errorf("Find (-want +got):\n%s", diff)
			}
			if got := strings.Join(warnings, "; "); tc.warn == "" && got != "" || !strings.Contains(got, tc.warn) {
				t.Errorf("warnings %q, want %q", got, tc.warn)
			}
		})
	}
}

// TestSplit checks that a new image is written in the form the values
// have, as Flux v1's helm-operator wrote it.
func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, to string
		want             map[string]string
		err              string
	}{
		{name: "fluxv1/string image gets the whole reference", values: "image: repo/app:1.0\n", to: "repo/app:1.1",
			want: map[string]string{"image": "repo/app:1.1"}},
		{name: "fluxv1/string image with sibling tag gets name and tag", values: "image: reg:5000/app\ntag: \"1.0\"\n", to: "reg:5000/app:1.1",
			want: map[string]string{"image": "reg:5000/app", "tag": "1.1"}},
		{name: "fluxv1/repository and tag", values: "image: {repository: bitnami/redis, tag: \"7.2\"}\n", to: "bitnami/redis:7.4",
			want: map[string]string{"image.repository": "bitnami/redis", "image.tag": "7.4"}},
		{name: "fluxv1/registry, repository and tag", values: "image: {registry: docker.io, repository: bitnami/redis, tag: \"7.2\"}\n", to: "docker.io/bitnami/redis:7.4",
			want: map[string]string{"image.registry": "docker.io", "image.repository": "bitnami/redis", "image.tag": "7.4"}},
		{name: "fluxv1/registry with a repository holding the tag", values: "image: {registry: quay.io, repository: \"team/app:1\"}\n", to: "quay.io/team/app:2",
			want: map[string]string{"image.registry": "quay.io", "image.repository": "team/app:2"}},
		{name: "fluxv1/repository holding the tag", values: "image: {repository: \"team/app:1\"}\n", to: "team/app:2",
			want: map[string]string{"image.repository": "team/app:2"}},
		{name: "fluxd/registry with a port", values: "image: {registry: \"127.0.0.1:5000\", repository: team/app, tag: \"1\"}\n", to: "127.0.0.1:5000/team/app:2",
			want: map[string]string{"image.registry": "127.0.0.1:5000", "image.repository": "team/app", "image.tag": "2"}},
		{name: "fluxd/an image naming no registry empties the registry field", values: "image: {registry: quay.io, repository: team/app, tag: \"1\"}\n", to: "team/app:2",
			want: map[string]string{"image.registry": "", "image.repository": "team/app", "image.tag": "2"}},
		{name: "fluxd/a separate tag needs a tag", values: "image: {repository: app, tag: \"1\"}\n", to: "app@sha256:" + strings.Repeat("a", 64),
			err: "has no tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			imgs, _ := Find(nil, values(t, tc.values))
			if len(imgs) != 1 {
				t.Fatalf("found %d images, want 1", len(imgs))
			}
			as, err := imgs[0].Split(tc.to)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Split error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, a := range as {
				got[strings.Join(a.Field.Path, ".")] = a.Value
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Split (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsHelmRelease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"helm.toolkit.fluxcd.io/v2", "HelmRelease", true},
		{"helm.toolkit.fluxcd.io/v2beta1", "HelmRelease", true},
		{"helm.toolkit.fluxcd.io/v2beta2", "HelmRelease", true},
		{"helm.fluxcd.io/v1", "HelmRelease", true},
		{"flux.weave.works/v1beta1", "HelmRelease", false},
		{"helm.toolkit.fluxcd.io/v2", "HelmRepository", false},
	} {
		if got := IsHelmRelease(tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("IsHelmRelease(%q, %q) = %v, want %v", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}
