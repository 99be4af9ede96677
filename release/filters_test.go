package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// countingImages counts what a plan asks of the registry.
type countingImages struct {
	memImages
	mu                     sync.Mutex // a plan reads tag lists side by side (prefetchTags)
	tagLists, metadataTags int
}

func (c *countingImages) Tags(ctx context.Context, repo string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tagLists++
	return c.memImages.Tags(ctx, repo)
}

func (c *countingImages) ImagesMatching(ctx context.Context, repo string, keep func(string) bool) ([]registry.Image, error) {
	imgs, err := c.memImages.ImagesMatching(ctx, repo, keep)
	c.metadataTags += len(imgs)
	return imgs, err
}

const policyYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ranged
  namespace: default
  annotations:
    fluxd.io/tag.app: "semver:~1.2"
    fluxd.io/tag.init: "semver:patch"
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: reg/app:1.2.3
      containers:
      - name: app
        image: reg/app:1.2.3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: minor
  namespace: default
  annotations:
    fluxd.io/tag-all: "semver:minor"
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:1.2.3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: globbed
  namespace: default
  annotations:
    fluxd.io/tag-all: "glob:main-*"
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:main-1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nomatch
  namespace: default
  annotations:
    fluxd.io/tag-all: "glob:release-*"
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:1.2.3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
  namespace: default
  annotations:
    fluxd.io/tag-all: "semver:>>1"
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:1.2.3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: undated
  namespace: default
  annotations:
    fluxd.io/tag-all: "glob:nightly-*"
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:nightly-1
`

func TestPlanFollowsTagFilters(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var imgs []registry.Image
	for i, tag := range []string{"1.2.3", "1.2.9", "1.3.0", "2.0.0", "1.2.10-rc.1", "main-1", "main-3", "main-2", "latest"} {
		imgs = append(imgs, registry.Image{Repository: "reg/app", Tag: tag, CreatedAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	// main-2 is the newest build although main-3 sorts last by name;
	// nightly images carry the epoch, as reproducible builds write.
	imgs[7].CreatedAt = t0.Add(100 * time.Hour)
	imgs = append(imgs, registry.Image{Repository: "reg/app", Tag: "nightly-2", CreatedAt: time.Unix(0, 0)})
	images := &countingImages{memImages: memImages{"reg/app": imgs}}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	plan, err := e.Plan(ctx, Spec{Services: []platform.ID{id("ranged"), id("minor")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(flatten(plan), " | ")
	want := "minor: app:reg/app:1.2.3->reg/app:1.3.0 | ranged: init:reg/app:1.2.3->reg/app:1.2.9 | ranged: app:reg/app:1.2.3->reg/app:1.2.9"
	if got != want {
		t.Errorf("semver plan:\n got %s\nwant %s", got, want)
	}
	if images.metadataTags != 0 || images.tagLists != 1 {
		t.Errorf("semver policies read %d tag lists and metadata of %d tags; want 1 list and no metadata", images.tagLists, images.metadataTags)
	}

	images.metadataTags, images.tagLists = 0, 0
	plan, err = e.Plan(ctx, Spec{Services: []platform.ID{id("globbed"), id("nomatch"), id("broken"), id("undated")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Item{}
	for _, it := range plan.Items {
		byName[it.Service.Name] = it
	}
	if u := byName["globbed"].Updates; len(u) != 1 || u[0].Target != "reg/app:main-2" {
		t.Errorf("glob:main-* should pick the newest build main-2: %+v", byName["globbed"])
	}
	if images.metadataTags > 3+1 {
		t.Errorf("glob policy read metadata of %d tags; want only the 3 main-* tags (+ nightly)", images.metadataTags)
	}
	for name, want := range map[string]string{
		"nomatch": "tag filter glob:release-* matches no tag of reg/app",
		"broken":  "invalid policy: annotation fluxd.io/tag-all: tag filter \"semver:>>1\": bad semver range",
		"undated": "no image of reg/app passing glob:nightly-* has a creation time",
	} {
		it := byName[name]
		if it.Action != Skip || len(it.Warnings) != 1 || !strings.Contains(it.Warnings[0], want) {
			t.Errorf("%s: %s %q warnings %q; want a skip warning %q", name, it.Action, it.Reason, it.Warnings, want)
		}
	}
}

func flatten(p *Plan) []string {
	var out []string
	for _, it := range p.Items {
		for _, u := range it.Updates {
			out = append(out, it.Service.Name+": "+u.Container+":"+u.Current+"->"+u.Target)
		}
	}
	return out
}

func TestContainerFilterAnnotations(t *testing.T) {
	ann := map[string]string{AnnotationTagAll: "semver:minor", AnnotationTagPrefix + "side": "", AnnotationTagPrefix + "web": "glob:main-*",
		AnnotationTagOrder: "numerical", AnnotationTagPrerelease: "true"}
	for c, want := range map[string]string{"side": "semver:minor", "web": "glob:main-*", "other": "semver:minor"} {
		f, err := ContainerFilter(ann, c)
		if err != nil || f.String() != want || !f.Prerelease {
			t.Errorf("%s: %v %v (prerelease %v); want %s with pre-releases", c, f, err, f.Prerelease, want)
		}
	}
	if f, _ := ContainerFilter(ann, "web"); f.Order != registry.ByNumerical {
		t.Errorf("web's order = %s", f.Order)
	}
	set, err := FilterAnnotations(nil, map[string]string{"web": "*"}, nil, ptrTo(false))
	if err != nil || set[AnnotationTagPrefix+"web"] != "" || set[AnnotationTagPrerelease] != "" || len(set) != 2 {
		t.Errorf("clearing: %v %v", set, err)
	}
}

func ptrTo[T any](v T) *T { return &v }

const noFilterYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: pinned
  namespace: default
spec:
  template:
    spec:
      containers:
      - name: app
        image: reg/app:1.2.3
      - name: sidecar
        image: reg/side:1.4.5
`

// With no filter and the default order by build time, latest pushed
// with (or after) 1.2.3 moved a service pinned to 1.2.3 onto latest; and
// a build-number tag newer than every version won the same way.
func TestPlanWithoutFilterKeepsVersions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(noFilterYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{
		"reg/app": {
			{Repository: "reg/app", Tag: "1.2.3", CreatedAt: t0},
			{Repository: "reg/app", Tag: "latest", CreatedAt: t0.Add(time.Hour)},
		},
		"reg/side": {
			{Repository: "reg/side", Tag: "1.4.5", CreatedAt: t0},
			{Repository: "reg/side", Tag: "1.4.6", CreatedAt: t0.Add(time.Hour)},
			{Repository: "reg/side", Tag: "3050", CreatedAt: t0.Add(2 * time.Hour)},
			{Repository: "reg/side", Tag: "main-abc1234", CreatedAt: t0.Add(3 * time.Hour)},
		},
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("pinned")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(flatten(plan), " | "), "pinned: sidecar:reg/side:1.4.5->reg/side:1.4.6"; got != want {
		t.Errorf("plan:\n got %s\nwant %s", got, want)
	}
}

// A service running latest (or a branch tag) with no filter is not moved
// onto whichever version is newest: the plan says a filter must choose.
func TestPlanWithoutFilterLeavesANonVersionAlone(t *testing.T) {
	dir := t.TempDir()
	yaml := strings.Replace(noFilterYAML, "reg/app:1.2.3", "reg/app:latest", 1)
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{
		"reg/app":  {{Repository: "reg/app", Tag: "latest", CreatedAt: t0}, {Repository: "reg/app", Tag: "3050", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/app", Tag: "1.0.0", CreatedAt: t0.Add(2 * time.Hour)}},
		"reg/side": {{Repository: "reg/side", Tag: "1.4.5", CreatedAt: t0}},
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("pinned")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 1 || plan.Items[0].Action == Update || !strings.Contains(plan.Items[0].Reason, `runs "latest", which is not a version`) {
		t.Errorf("plan: %+v", plan.Items)
	}
}
