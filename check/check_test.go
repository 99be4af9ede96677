package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each case is one peer's documented rule as fluxctl check reports it,
// read from testdata/peers, a repository with each tool's annotations.
func TestRepositoryPeerRules(t *testing.T) {
	t.Parallel()
	r, err := Repository("testdata/peers", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) > 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	byID := map[string]Service{}
	for _, s := range r.Services {
		byID[s.ID] = s
	}
	for _, tc := range []struct {
		name, id string
		// want is compared on the fields it sets; warn are parts of
		// warnings expected, each in one of them.
		dialects   []string
		automated  bool
		locked     bool
		containers []Container
		suggest    map[string]string
		warn       []string
	}{
		{name: "fluxd: pin-digest pins, and a misspelt fluxd.io/ key is flagged", id: "default:deployment/own",
			dialects: []string{"fluxd"}, automated: true,
			containers: []Container{{Name: "app", Image: "reg.example/app:1.2.3@sha256:" + strings.Repeat("a", 64), Filter: "semver:~1.2", Pinned: true}},
			warn:       []string{"fluxd.io/pin-digets.app is not one of fluxd's annotations"}},
		{name: "flux v1: fluxcd.io/ wins over flux.weave.works/; an unknown fluxcd.io/ key is not read", id: "default:deployment/flux",
			dialects: []string{"flux-v1", "flux-v1 (flux.weave.works)"}, automated: true,
			containers: []Container{{Name: "web", Image: "reg.example/web:1.21.0", Filter: "glob:1.21.*", Order: "time"}},
			warn:       []string{`flux.weave.works/automated: "false" is overridden by fluxcd.io/automated: "true"`, "fluxcd.io/frobnicate is not read"}},
		{name: "flux v1: filter.fluxcd.io/<container> is the container's filter; one naming no container is flagged", id: "default:deployment/filtered",
			dialects: []string{"flux-v1"}, automated: true,
			containers: []Container{{Name: "app", Image: "reg.example/app:4.0.1", Filter: "semver:~4.0"}, {Name: "sidecar", Image: "reg.example/proxy:stg-1", Filter: "glob:*", Order: "time"}},
			warn:       []string{`filter.fluxcd.io/sidecr names the container "sidecr", which this object does not have (its containers are app, sidecar)`}},
		{name: "helm-operator: filter.fluxcd.io/chart-image filters the top-level image; tag.fluxcd.io/ without repository.fluxcd.io/ is flagged", id: "default:helmrelease/mongodb",
			dialects: []string{"flux-v1"}, automated: true,
			containers: []Container{{Name: "chart-image", Image: "reg.example/mongodb:4.0.3", Filter: "semver:~4.0"}},
			warn:       []string{"tag.fluxcd.io/metrics does nothing without repository.fluxcd.io/metrics"}},
		{name: "flux v1: ignore true is not released", id: "default:deployment/ignored",
			dialects: []string{"flux-v1"}, locked: true,
			containers: []Container{{Name: "web", Image: "reg.example/web:1.0.0", Filter: "glob:*", Order: "time"}}},
		{name: "keel: force with match-tag follows the running tag's digest; trigger and pollSchedule are not read", id: "default:deployment/keel-force",
			dialects: []string{"keel"}, automated: true,
			containers: []Container{{Name: "app", Image: "reg.example/app:latest", Pinned: true, FollowsTag: true}},
			warn:       []string{"keel.sh/trigger is not needed", "keel.sh/pollSchedule is not read"}},
		{name: "keel: a policy label is read; approvals are not built", id: "default:statefulset/keel-label",
			dialects: []string{"keel", "keel (labels)"}, automated: true,
			containers: []Container{{Name: "db", Image: "reg.example/db:3.4.5", Filter: "semver:minor"}},
			warn:       []string{"keel.sh/approvals) are not built"}},
		{name: "flux v2: an ImagePolicy is the service of the fields its $imagepolicy markers mark, under the automation's update.path", id: "flux-system:imagepolicy/podinfo",
			dialects: []string{"flux-v2"}, automated: true,
			containers: []Container{{Name: "fluxv2/podinfo.yaml:Deployment/flux-system/podinfo:spec.template.spec.containers[0].image", Image: "reg.example/podinfo:5.0.0", Filter: "semver:5.0.x"}}},
		{name: "flux v2: the marked Deployment itself stays a manual service", id: "flux-system:deployment/podinfo",
			containers: []Container{{Name: "podinfo", Image: "reg.example/podinfo:5.0.0"}}},
		{name: "helm-operator: a HelmRelease's top-level image.{repository,tag} is the container chart-image, with Flux v1's annotations", id: "default:helmrelease/redis",
			dialects: []string{"flux-v1"}, automated: true,
			containers: []Container{{Name: "chart-image", Image: "reg.example/redis:7.2.4", Filter: "semver:~7.2"}}},
		{name: "argo cd image updater: image-list with semver, newest-build and digest strategies, mapped and not read", id: "argocd:application/shop",
			dialects: []string{"argocd-image-updater"}, automated: true,
			containers: []Container{
				{Name: "front", Image: "reg.example/front:~1.4", Filter: "semver:~1.4"},
				{Name: "cache", Image: "reg.example/cache", Filter: "regex:^main-[0-9a-f]{7}$", Order: "time"},
				{Name: "edge", Image: "reg.example/edge:latest", Pinned: true, FollowsTag: true},
			},
			suggest: map[string]string{"fluxd.io/automated": "true", "fluxd.io/tag.front": "semver:~1.4", "fluxd.io/tag.cache": "regex:^main-[0-9a-f]{7}$",
				"fluxd.io/pin-digest.edge": "true", "fluxd.io/follow-tag": "true"},
			warn: []string{"fluxd does not read Argo CD Image Updater's annotations", `ignore-tags "main-dead*" has no fluxd equivalent`, "front.helm.image-name has no fluxd equivalent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := byID[tc.id]
			if !ok {
				t.Fatalf("%s not reported; got %v", tc.id, r.Services)
			}
			if diff := cmp.Diff(tc.dialects, s.Dialects); diff != "" {
				t.Errorf("dialects (-want +got):\n%s", diff)
			}
			if s.Automated != tc.automated || s.Locked != tc.locked {
				t.Errorf("automated %v locked %v; want %v %v", s.Automated, s.Locked, tc.automated, tc.locked)
			}
			if diff := cmp.Diff(tc.containers, s.Containers); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
			if tc.suggest != nil {
				if diff := cmp.Diff(tc.suggest, s.Suggest); diff != "" {
					t.Errorf("suggestions (-want +got):\n%s", diff)
				}
			}
			all := strings.Join(s.Warnings, "\n")
			for _, w := range tc.warn {
				if !strings.Contains(all, w) {
					t.Errorf("no warning says %q; warnings:\n%s", w, all)
				}
			}
			if len(s.Warnings) != len(tc.warn) {
				t.Errorf("%d warnings; want %d:\n%s", len(s.Warnings), len(tc.warn), all)
			}
		})
	}
}

// A path outside the repository, or one that is not there, is refused
// with what to fix, before anything is read.
func TestRepositoryBadPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"../x", "nowhere"} {
		if _, err := Repository("testdata/peers", []string{p}); err == nil || !strings.Contains(err.Error(), "git path") {
			t.Errorf("path %q: %v; want an error about the git path", p, err)
		}
	}
}

// A pinned workload that a kustomization builds is reported as not
// released (pins in images: entries are not built), as the plan says.
func TestRepositoryKustomizePinIsNotBuilt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for name, content := range map[string]string{
		"kustomization.yaml": "resources: [web.yaml]\ncommonAnnotations:\n  fluxd.io/pin-digest: \"true\"\n",
		"web.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n        - {name: app, image: reg/web:1.0.0}\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Repository(root, nil)
	if err != nil || len(r.Services) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if s := r.Services[0]; !s.Containers[0].Pinned || !strings.Contains(strings.Join(s.Warnings, "\n"), "not implemented yet") {
		t.Errorf("%+v; want the pin reported, with a warning that it is not built", s)
	}
}

// TestRepositoryReadsPipelines: fluxctl check lists a Pipeline's stages
// and gates, warns of a stage's service that is not in git, and reports a
// bad Pipeline with its file and line while reading the good one beside
// it.
func TestRepositoryReadsPipelines(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: dev}\nspec:\n  template:\n    spec:\n      containers: [{name: app, image: reg.example/web:1.0.0}]\n")
	write("pipeline.yaml", `apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: web, namespace: team}
spec:
  stages:
  - name: dev
    services: [dev:deployment/web]
  - name: prod
    from: dev
    services: [prod:deployment/web]
    approvals: 2
    soak: 1h
    checks:
    - http: {url: "http://web.prod/healthz"}
---
apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: bad, namespace: team}
spec:
  stages:
  - name: dev
    services: [dev:deployment/other]
    aprovals: 1
`)
	r, err := Repository(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pipelines) != 1 || r.Pipelines[0].ID != "team/web" {
		t.Fatalf("pipelines: %+v", r.Pipelines)
	}
	p := r.Pipelines[0]
	if got := fmt.Sprint(p.Stages[1].Gates); got != "[soak 1h0m0s 2 approvals check http-0 (http)]" {
		t.Errorf("prod's gates: %s", got)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "stage prod names prod:deployment/web, which is not a service in git") {
		t.Errorf("warnings: %v", p.Warnings)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "pipeline.yaml:23: stage 1 has no field aprovals") {
		t.Errorf("problems: %v", r.Problems)
	}
}
