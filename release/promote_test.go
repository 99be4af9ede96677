package release

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
)

// promo is a promotion of bundle into stage staging of pipeline web.
func promo(bundle string, images ...PromotedImage) *Promotion {
	return &Promotion{Pipeline: "web", Stage: "staging", Bundle: bundle, Images: images}
}

func pimg(repo, tag, digest string) PromotedImage {
	return PromotedImage{Repository: repo, Tag: tag, Digest: digest}
}

func ids(names ...string) []platform.ID {
	var out []platform.ID
	for _, n := range names {
		out = append(out, id(n))
	}
	return out
}

func TestPromotionValidate(t *testing.T) {
	ok := Spec{Services: ids("web"), User: "dana", Promotion: promo("b1", pimg("reg/web", "1.2", dg('2')))}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid promotion: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"all services", func(s *Spec) { s.Services, s.All = nil, true }, "names all services"},
		{"no services", func(s *Spec) { s.Services = nil }, "names no services"},
		{"an image too", func(s *Spec) { s.Image = "reg/web:1.3" }, "a promotion's images are its bundle's"},
		{"all latest too", func(s *Spec) { s.AllLatest = true }, "a promotion's images are its bundle's"},
		{"automated", func(s *Spec) { s.Automated = true }, "give the user \"fluxd\""},
		{"exclude", func(s *Spec) { s.Exclude = ids("other") }, "excludes services"},
		{"no bundle", func(s *Spec) { s.Promotion.Bundle = "" }, "must name its pipeline, stage and bundle"},
		{"no images", func(s *Spec) { s.Promotion.Images = nil }, "has no images"},
		{"no repository", func(s *Spec) { s.Promotion.Images[0].Repository = "" }, "image 1: it has no repository"},
		{"no tag", func(s *Spec) { s.Promotion.Images[0].Tag = "" }, "reg/web has no tag"},
		{"no digest", func(s *Spec) { s.Promotion.Images[0].Digest = "" }, "reg/web:1.2 has no digest"},
		{"not a sha256 digest", func(s *Spec) { s.Promotion.Images[0].Digest = "md5:abc" }, `digest "md5:abc" is not sha256:`},
		{"a tag in the repository", func(s *Spec) { s.Promotion.Images[0].Repository = "reg/web:1.0" }, "is not a valid image reference"},
		{"a repository twice", func(s *Spec) {
			s.Promotion.Images = append(s.Promotion.Images, pimg("reg/web", "1.3", dg('3')))
		}, "repository reg/web is in the bundle twice"},
		{"a trailer in the message", func(s *Spec) { s.Message = "Fluxd-Job: x" }, "Fluxd-Job:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			p := *ok.Promotion
			p.Images = append([]PromotedImage(nil), ok.Promotion.Images...)
			s.Promotion = &p
			tc.edit(&s)
			err := s.Validate()
			if fluxerr.KindOf(err) != fluxerr.User || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want a user error saying %q", err, tc.want)
			}
		})
	}
}

const promoApps = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.0
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: current, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: frozen
  namespace: default
  annotations: {fluxd.io/locked: "true", fluxd.io/lock-message: "incident 7"}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.0
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pinned
  namespace: default
  annotations: {fluxd.io/pin-digest: "true"}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000000
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pinnedcurrent
  namespace: default
  annotations: {fluxd.io/pin-digest: "true"}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.2@sha256:2222222222222222222222222222222222222222222222222222222222222222
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: both, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.0
      - name: db
        image: reg/db:4
      - name: side
        image: reg/side:1
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: other
        image: reg/other:1
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: untagged, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: handpinned, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web:1.2@sha256:2222222222222222222222222222222222222222222222222222222222222222
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: halftagged, namespace: default}
spec:
  template:
    spec:
      containers:
      - name: web
        image: reg/web
      - name: db
        image: reg/db:4
`

const promoHelm = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hweb
  namespace: default
spec:
  chart: {spec: {chart: web}}
  values:
    image:
      repository: reg/web
      tag: "1.0"
`

var hrHweb = platform.ID{Namespace: "default", Kind: platform.KindHelmRelease, Name: "hweb"}

// promoImages are the registry: reg/web 1.0, 1.2 and 1.3; reg/db 4 and 5.
func promoImages() memImages {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return memImages{
		"reg/web": {
			{Repository: "reg/web", Tag: "1.0", Digest: dg('0'), CreatedAt: t0},
			{Repository: "reg/web", Tag: "1.2", Digest: dg('2'), CreatedAt: t0.Add(time.Hour)},
			{Repository: "reg/web", Tag: "1.3", Digest: dg('3'), CreatedAt: t0.Add(2 * time.Hour)},
		},
		"reg/db": {
			{Repository: "reg/db", Tag: "4", Digest: dg('4'), CreatedAt: t0},
			{Repository: "reg/db", Tag: "5", Digest: dg('5'), CreatedAt: t0.Add(time.Hour)},
		},
	}
}

func promoEngine(t *testing.T, images Images) (*Engine, *recRepo, *recCluster, *recRecorder) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"apps.yaml":               promoApps,
		"helm.yaml":               promoHelm,
		"kust/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\"\n",
		"kust/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: kweb, namespace: default}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
		"kpin/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [deployment.yaml]\nimages:\n- name: reg/web\n  newTag: \"1.0\"\n",
		"kpin/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: kpweb\n  namespace: default\n  annotations: {fluxd.io/pin-digest: \"true\"}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: reg/web:0.1\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{applied: map[platform.ID]string{}}
	rec := &recRecorder{}
	return NewEngine(repo, images, cluster, rec, slog.New(slog.NewTextHandler(io.Discard, nil))), repo, cluster, rec
}

// readCounter counts every registry read a plan makes.
type readCounter struct {
	memImages
	mu    sync.Mutex // a plan reads tag lists side by side (prefetchTags)
	reads int
}

func (c *readCounter) ImagesMatching(ctx context.Context, repo string, keep func(string) bool) ([]registry.Image, error) {
	c.reads++
	return c.memImages.ImagesMatching(ctx, repo, keep)
}

func (c *readCounter) Tags(ctx context.Context, repo string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.memImages.Tags(ctx, repo)
}

func (c *readCounter) Exists(ctx context.Context, ref string) (bool, error) {
	c.reads++
	return c.memImages.Exists(ctx, ref)
}

func TestPlanPromotion(t *testing.T) {
	web12 := pimg("reg/web", "1.2", dg('2'))
	db5 := pimg("reg/db", "5", dg('5'))
	for _, tc := range []struct {
		name     string
		services []platform.ID
		images   []PromotedImage
		force    bool
		scope    *auth.Scope
		want     []row
		err      string       // part of the error that refuses the plan
		kind     fluxerr.Kind // its kind
		noReads  bool         // refused before any registry read
	}{
		{name: "a plain workload gets the tag", services: ids("web"), images: []PromotedImage{web12},
			want: []row{{"web", "update", "", "web:reg/web:1.0->reg/web:1.2"}}},
		{name: "a pinned workload gets the tag and the bundle's digest", services: ids("pinned"), images: []PromotedImage{web12},
			want: []row{{"pinned", "update", "", "web:reg/web:1.0@" + dg('0') + "->reg/web:1.2@" + dg('2')}}},
		{name: "a workload on the bundle's tag is up to date", services: ids("current"), images: []PromotedImage{web12},
			want: []row{{"current", "uptodate", "container web already runs bundle b1", ""}}},
		{name: "a pinned workload on the bundle's tag and digest is up to date", services: ids("pinnedcurrent"), images: []PromotedImage{web12},
			want: []row{{"pinnedcurrent", "uptodate", "container web already runs bundle b1", ""}}},
		{name: "a workload pinned by hand at the bundle's tag and digest is up to date", services: ids("handpinned"), images: []PromotedImage{web12},
			want: []row{{"handpinned", "uptodate", "container web already runs bundle b1", ""}}},
		{name: "every container running a bundle image moves, the others stay", services: ids("both"), images: []PromotedImage{web12, db5},
			want: []row{{"both", "update", "", "web:reg/web:1.0->reg/web:1.2,db:reg/db:4->reg/db:5"}}},
		{name: "a service running none of the bundle is left alone", services: ids("web", "other"), images: []PromotedImage{web12},
			want: []row{{"other", "skip", ReasonNotUsed, ""}, {"web", "update", "", "web:reg/web:1.0->reg/web:1.2"}}},
		{name: "a kustomization's images: entry", services: []platform.ID{id("kweb")}, images: []PromotedImage{web12},
			want: []row{{"kweb", "update", "", "web:reg/web:1.0->reg/web:1.2"}}},
		{name: "a HelmRelease's values", services: []platform.ID{hrHweb}, images: []PromotedImage{web12},
			want: []row{{"hweb", "update", "", "chart-image:reg/web:1.0->reg/web:1.2"}}},
		{name: "a locked service refuses the promotion", services: ids("web", "frozen"), images: []PromotedImage{web12},
			err: "default:deployment/frozen is locked: incident 7", kind: fluxerr.Precondition},
		{name: "a locked service is promoted with force", services: ids("frozen"), images: []PromotedImage{web12}, force: true,
			want: []row{{"frozen", "update", "", "web:reg/web:1.0->reg/web:1.2"}}},
		{name: "a bundle image no service runs refuses it, before any registry read", services: ids("web"), images: []PromotedImage{web12, db5},
			err: "no container of its services (default:deployment/web) runs reg/db: they run reg/web", kind: fluxerr.Precondition, noReads: true},
		{name: "a bundle image run only outside the caller's scope refuses it", services: ids("web"), images: []PromotedImage{web12},
			scope: &auth.Scope{Namespaces: []string{"team-b"}}, err: "runs reg/web: none of them runs an image in git", kind: fluxerr.Precondition, noReads: true},
		{name: "a tag that moved since the bundle was verified refuses it", services: ids("web"), images: []PromotedImage{pimg("reg/web", "1.3", dg('9'))},
			err: "the tag reg/web:1.3 moved since the bundle was verified: the registry gives it " + dg('3') + ", the bundle " + dg('9'), kind: fluxerr.Precondition},
		{name: "a tag gone from the registry refuses it", services: ids("web"), images: []PromotedImage{pimg("reg/web", "1.4", dg('4'))},
			err: "reg/web:1.4 is no longer in its registry", kind: fluxerr.Precondition},
		{name: "a container without a tag refuses it (all or nothing)", services: ids("web", "untagged"), images: []PromotedImage{web12},
			err: "default:deployment/untagged: container web runs \"reg/web\", which has no tag", kind: fluxerr.Precondition},
		{name: "a container that cannot move beside one that can refuses it", services: ids("halftagged"), images: []PromotedImage{web12, db5},
			err: "cannot promote bundle b1 to stage staging (pipeline web) as a whole: default:deployment/halftagged: container web runs \"reg/web\", which has no tag", kind: fluxerr.Precondition},
		{name: "a pin through a kustomization's images: refuses it", services: ids("kpweb"), images: []PromotedImage{web12},
			err: "pinning digests through a kustomization's images: entries (kpin/kustomization.yaml) is not implemented yet", kind: fluxerr.Precondition},
		{name: "a service not in git refuses it", services: ids("web", "ghost"), images: []PromotedImage{web12},
			err: "default:deployment/ghost: " + ReasonNotInGit, kind: fluxerr.Precondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &readCounter{memImages: promoImages()}
			e, _, _, _ := promoEngine(t, reg)
			spec := Spec{Services: tc.services, User: "dana", Force: tc.force, Scope: tc.scope, Promotion: promo("b1", tc.images...)}
			p, err := e.Plan(context.Background(), spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || fluxerr.KindOf(err) != tc.kind {
					t.Fatalf("err = %v (%v); want a %v error saying %q", err, fluxerr.KindOf(err), tc.kind, tc.err)
				}
				if tc.noReads && reg.reads != 0 {
					t.Errorf("refused after %d registry reads; want none", reg.reads)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rows(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.Promotion == nil || p.Promotion.Bundle != "b1" {
				t.Errorf("the plan does not say which promotion it is: %+v", p.Promotion)
			}
		})
	}
}

// A confirmed plan is the promotion of one bundle: the same updates for
// another bundle, or another stage, do not run under its checksum.
func TestPromotionChecksumCoversTheBundle(t *testing.T) {
	e, repo, _, _ := promoEngine(t, promoImages())
	ctx := context.Background()
	web12 := pimg("reg/web", "1.2", dg('2'))
	specA := Spec{Services: ids("web"), User: "dana", Promotion: promo("bundle-a", web12)}
	a, err := e.Plan(ctx, specA)
	if err != nil {
		t.Fatal(err)
	}
	specB := specA
	specB.Promotion = promo("bundle-b", web12)
	b, err := e.Plan(ctx, specB)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Diff(rows(a), rows(b)) != "" {
		t.Fatalf("the two bundles plan differently: %v, %v", rows(a), rows(b))
	}
	if a.Checksum == b.Checksum {
		t.Fatalf("bundles a and b, with the same updates, have the same checksum %s", a.Checksum)
	}
	specProd := specA
	specProd.Promotion = promo("bundle-a", web12)
	specProd.Promotion.Stage = "prod"
	if p, err := e.Plan(ctx, specProd); err != nil || p.Checksum == a.Checksum {
		t.Errorf("bundle a into another stage: %v, checksum %v; want another checksum than %s", err, p, a.Checksum)
	}
	release, err := e.Plan(ctx, Spec{Services: ids("web"), Image: "reg/web:1.2", User: "dana"})
	if err != nil || release.Checksum == a.Checksum {
		t.Errorf("a release of the same image: %v; want another checksum than the promotion's", err)
	}
	_, err = e.Execute(ctx, "team", specB, history.Release, ExecOptions{Checksum: a.Checksum})
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "the confirmed plan promoted bundle bundle-a, this one bundle bundle-b") {
		t.Fatalf("bundle b under bundle a's checksum: %v; want it refused, saying which bundle was confirmed", err)
	}
	if repo.files != nil {
		t.Errorf("bundle b was committed under bundle a's checksum: %v", repo.files)
	}
	if _, err := e.Execute(ctx, "team", specA, history.Release, ExecOptions{Checksum: a.Checksum}); err != nil {
		t.Fatalf("bundle a under its own checksum: %v", err)
	}
	if !strings.Contains(string(repo.files["apps.yaml"]), "image: reg/web:1.2\n") {
		t.Errorf("bundle a's commit:\n%s", repo.files["apps.yaml"])
	}
}

// An ImagePolicy's marked fields (Flux v2 2.6, reflecting digests: the
// whole-image field, a :tag and :digest pair in a ConfigMap and in a
// kustomization's images: entry) are promoted like any service: the tag,
// and the digest where the field holds one. The commit says it is a
// promotion, is authored by the user, and the history row says so.
func TestPromotionOfMarkedFields(t *testing.T) {
	t.Parallel()
	const d12 = "sha256:1200000000000000000000000000000000000000000000000000000000000000"
	e, repo, cluster, _ := layoutEngine(t, filepath.Join("testdata", "fluxv2", "digest-reflection.txtar"), nil)
	rec := &recRecorder{}
	e.recorder = jobRecorder{rec}
	spec := Spec{Services: []platform.ID{appPolicy}, User: "fluxd", Promotion: &Promotion{Pipeline: "app", Stage: "prod", Bundle: "5c0ffee",
		Images: []PromotedImage{pimg("reg/app", "1.2.0", d12)}}}
	res, err := e.Execute(context.Background(), "team", spec, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Updates() == 0 {
		t.Fatalf("nothing planned: %+v", rows(res.Plan))
	}
	plain := string(repo.files["apps/plain/app.yaml"])
	if !strings.Contains(plain, "image: reg/app:1.2.0@"+d12) || !strings.Contains(plain, "tag: 1.2.0") || !strings.Contains(plain, "digest: "+d12) {
		t.Errorf("apps/plain/app.yaml as committed:\n%s", plain)
	}
	if k := string(repo.files["apps/kust/kustomization.yaml"]); !strings.Contains(k, "newTag: 1.2.0") || !strings.Contains(k, "digest: "+d12) {
		t.Errorf("apps/kust/kustomization.yaml as committed:\n%s", k)
	}
	if first, _, _ := strings.Cut(repo.message, "\n"); first != "Promote bundle 5c0ffee to prod (pipeline app)" {
		t.Errorf("the commit's first line is %q", first)
	}
	if !strings.Contains(repo.message, "  reg/app:1.2.0@"+d12+"\n") {
		t.Errorf("the commit does not list the bundle's images:\n%s", repo.message)
	}
	if repo.author.Name != "fluxd" {
		t.Errorf("the commit's author is %+v; want fluxd, who promoted (not the ImageUpdateAutomation's author)", repo.author)
	}
	if _, ok := cluster.applied[id("pinned")]; !ok {
		t.Errorf("applied %v; want default:deployment/pinned", cluster.applied)
	}
	if len(rec.events) != 1 || rec.events[0].Type != history.Release || !strings.HasPrefix(rec.events[0].Message, "promotion of bundle 5c0ffee to stage prod (pipeline app)") {
		t.Errorf("history: %+v; want one release row saying it is the promotion", rec.events)
	}
}

// newPromoGit is newRealGit over the registry images.
func newPromoGit(t *testing.T, files map[string]string, images Images) *realGit {
	t.Helper()
	g := newRealGit(t, files)
	g.e = NewEngine(g.repo, images, g.cluster, g.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return g
}

// pushImage pushes a new random image as ref and returns its digest.
func pushImage(t *testing.T, ref string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// A promotion through a real git remote and a real registry (the
// registry client fluxd runs): the commit in the remote has the bundle's
// tag, and its digest in the pinned service; a locked service, a
// repository no service runs, a tag pushed again since the bundle was
// verified (though the registry cache still holds its old digest) and
// a tag gone from the registry each refuse it with nothing pushed.
func TestPromotionThroughRealGit(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	host := reg.Host()
	web := host + "/web"
	d10 := pushImage(t, web+":1.0")
	d12 := pushImage(t, web+":1.2")
	d13 := pushImage(t, web+":1.3")
	cache, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	client, err := oci.New(oci.Config{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The cache reads 1.3 before it is pushed again: it never reads a
	// version's digest again, so only a HEAD sees that 1.3 moved.
	if _, err := client.ImagesMatching(context.Background(), web, nil); err != nil {
		t.Fatal(err)
	}
	pushImage(t, web+":1.3")
	g := newPromoGit(t, map[string]string{
		"web.yaml":    deployment("web", web+":1.0"),
		"pinned.yaml": deployment("pinned", web+":1.0@"+d10, "fluxd.io/pin-digest", "true"),
		"frozen.yaml": deployment("frozen", web+":1.0", "fluxd.io/locked", "true", "fluxd.io/lock-message", "load test"),
	}, client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head := gitCLI(t, g.bare, "rev-parse", "main")
	promote := func(bundle string, services []platform.ID, images ...PromotedImage) error {
		t.Helper()
		spec := Spec{Services: services, User: "Dana <dana@example.com>", Promotion: &Promotion{Pipeline: "web", Stage: "staging", Bundle: bundle, Images: images}}
		_, err := g.e.Execute(ctx, "team", spec, history.Release, ExecOptions{JobID: "job-" + bundle})
		return err
	}
	nothingPushed := func(what string) {
		t.Helper()
		if now := gitCLI(t, g.bare, "rev-parse", "main"); now != head {
			t.Errorf("%s: the remote moved from %.12s to %.12s", what, head, now)
		}
		if len(g.cluster.applied) != 0 {
			t.Errorf("%s: applied %v", what, g.cluster.applied)
		}
	}

	err = promote("b-locked", ids("web", "frozen"), pimg(web, "1.2", d12))
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "default:deployment/frozen is locked: load test") {
		t.Errorf("a promotion into a locked service: %v; want it refused, saying who locked it", err)
	}
	nothingPushed("a locked service")

	reg.Reset()
	err = promote("b-api", ids("web"), pimg(host+"/api", "2.0", dg('a')))
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "runs "+host+"/api") {
		t.Errorf("a bundle of a repository the stage does not run: %v; want it refused", err)
	}
	if n := reg.Requests(); n != 0 {
		t.Errorf("the refusal of a repository no service runs made %d registry requests; want none", n)
	}
	nothingPushed("an unknown repository")

	err = promote("b-moved", ids("web", "pinned"), pimg(web, "1.3", d13))
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "the tag "+web+":1.3 moved since the bundle was verified") ||
		!strings.Contains(err.Error(), "Nothing was changed") {
		t.Errorf("a bundle whose tag was pushed again: %v; want it refused, saying the tag moved", err)
	}
	nothingPushed("a moved tag")

	err = promote("b-gone", ids("web"), pimg(web, "9.9", d12))
	if fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), web+":9.9 is no longer in its registry") {
		t.Errorf("a bundle whose tag is not in the registry: %v; want it refused, saying so", err)
	}
	nothingPushed("a tag gone from the registry")

	// Each refused job is recorded, as a failed promotion.
	if evs := g.events(t); len(evs) != 4 {
		t.Errorf("history has %d rows after four refused promotions; want 4: %+v", len(evs), evs)
	} else {
		for _, ev := range evs {
			if ev.Type != history.Failed || !strings.HasPrefix(ev.Message, "promotion of bundle b-") {
				t.Errorf("history row %+v; want a failed promotion", ev)
			}
		}
	}

	reg.Reset()
	if err := promote("b-ok", ids("web", "pinned"), pimg(web, "1.2", d12)); err != nil {
		t.Fatalf("promoting bundle b-ok: %v", err)
	}
	if n := reg.Heads.Load(); n != 1 {
		t.Errorf("the promotion of one image made %d manifest HEADs; want 1 (its tag's digest, read once for the plan and the locked plan)", n)
	}
	if got := g.remoteFile(t, "web.yaml"); !hasLine(got, "image: "+web+":1.2") {
		t.Errorf("the remote's web.yaml:\n%s", got)
	}
	if got := g.remoteFile(t, "pinned.yaml"); !hasLine(got, "image: "+web+":1.2@"+d12) {
		t.Errorf("the remote's pinned.yaml (pinned: the tag and its digest):\n%s", got)
	}
	if got := g.remoteFile(t, "frozen.yaml"); !hasLine(got, "image: "+web+":1.0") {
		t.Errorf("the locked service, not named, moved:\n%s", got)
	}
	commit := gitCLI(t, g.bare, "rev-parse", "main")
	if subject := gitCLI(t, g.bare, "log", "-1", "--format=%s", "main"); subject != "Promote bundle b-ok to staging (pipeline web)" {
		t.Errorf("the commit's subject is %q", subject)
	}
	if author := gitCLI(t, g.bare, "log", "-1", "--format=%an <%ae>", "main"); author != "Dana <dana@example.com>" {
		t.Errorf("the commit's author is %q; want who promoted", author)
	}
	if body := gitCLI(t, g.bare, "log", "-1", "--format=%b", "main"); !strings.Contains(body, web+":1.2@"+d12) {
		t.Errorf("the commit does not name the bundle's image:\n%s", body)
	}
	evs := g.events(t)
	if len(evs) == 0 || evs[0].Type != history.Release || evs[0].Commit != commit || evs[0].Message != "promotion of bundle b-ok to stage staging (pipeline web)" || len(evs[0].Changes) != 2 {
		t.Errorf("history's newest row %+v; want the promotion's release, with its commit and two changes", evs[0])
	}
}

// hasLine says whether s has a line that is line, indentation aside.
func hasLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// headImages is a registry client that reads a tag's digest with a HEAD
// (tagHeader), as registry/oci's does, counting them.
type headImages struct {
	memImages
	heads int
}

func (h *headImages) HeadDigest(_ context.Context, ref string) (string, error) {
	h.heads++
	r, err := registry.ParseRef(ref)
	if err != nil {
		return "", err
	}
	img, _ := findTag(h.memImages[r.Repository], r.Tag)
	return img.Digest, nil
}

// A container that spells a Docker Hub repository short (web, not
// docker.io/library/web) is promoted under its own spelling, and a pinned
// one gets the digest the HEAD read for the bundle's spelling: the plan
// asks the registry nothing else.
func TestPromotionOfAShortRepositoryName(t *testing.T) {
	dir := t.TempDir()
	yaml := pinDeploy("plain", "web:1.0") + pinDeploy("pinned", "web:1.0@"+dg('0'), `fluxd.io/pin-digest: "true"`)
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// Only the bundle's spelling is in the registry: a read under the
	// container's would fail.
	images := &headImages{memImages: memImages{"docker.io/library/web": {{Repository: "docker.io/library/web", Tag: "1.2", Digest: dg('2')}}}}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p, err := e.Plan(context.Background(), Spec{Services: ids("plain", "pinned"), User: "dana",
		Promotion: promo("b1", pimg("docker.io/library/web", "1.2", dg('2')))})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pinned: app:web:1.0@" + dg('0') + "->web:1.2@" + dg('2'), "plain: app:web:1.0->web:1.2"}
	if diff := cmp.Diff(want, flatten(p)); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
	if images.heads != 1 {
		t.Errorf("%d HEADs; want 1", images.heads)
	}
}

// The job queue keeps a job's spec and plan as JSON, and a take-over
// reads them back: a promotion survives the trip, so the taken-over job
// still commits, records and checks as a promotion.
func TestPromotionSurvivesTheJobStore(t *testing.T) {
	e, _, _, _ := promoEngine(t, promoImages())
	spec := Spec{Services: ids("pinned"), User: "dana", Promotion: promo("b1", pimg("reg/web", "1.2", dg('2')))}
	plan, err := e.Plan(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var spec2 Spec
	var plan2 Plan
	for _, rt := range []struct {
		in, out any
	}{{spec, &spec2}, {plan, &plan2}} {
		b, err := json.Marshal(rt.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, rt.out); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(spec, spec2); diff != "" {
		t.Errorf("the spec after JSON (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(*plan, plan2); diff != "" {
		t.Errorf("the plan after JSON (-before +after):\n%s", diff)
	}
	if plan2.Promotion == nil || checksum(&plan2, nil, nil) == checksum(&Plan{Items: plan2.Items}, nil, nil) {
		t.Errorf("the plan read back does not carry its promotion into the checksum")
	}
}
