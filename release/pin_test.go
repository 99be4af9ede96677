package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func dg(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// pinDeploy is a Deployment of one container app running image, with
// annotations (key: value lines, indented by the caller's format).
func pinDeploy(name, image string, ann ...string) string {
	s := "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: default\n"
	if len(ann) > 0 {
		s += "  annotations:\n"
		for _, a := range ann {
			s += "    " + a + "\n"
		}
	}
	return s + "spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + image + "\n"
}

// Each case is a rule of pinned digests (docs/migrate.md), or the peer
// rule it maps: Keel's force, force with match-tag, Flux v2's
// digestReflectionPolicy: Always.
func TestPlanPinnedDigests(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{"reg/app": {
		{Repository: "reg/app", Tag: "1.0.0", Digest: dg('1'), CreatedAt: t0},
		{Repository: "reg/app", Tag: "1.1.0", Digest: dg('2'), CreatedAt: t0.Add(time.Hour)},
		{Repository: "reg/app", Tag: "latest", Digest: dg('3'), CreatedAt: t0.Add(2 * time.Hour)},
		{Repository: "reg/app", Tag: "main-7", Digest: dg('4'), CreatedAt: t0.Add(3 * time.Hour)},
	}}
	for _, tc := range []struct {
		name, yaml string
		want       []string // flattened updates
		reason     string   // part of a skip reason
	}{
		{name: "pin: a moved mutable tag is released at its new digest (Flux v2 digestReflectionPolicy: Always)",
			yaml: pinDeploy("s", "reg/app:latest@"+dg('9'), `fluxd.io/pin-digest: "true"`),
			want: []string{"s: app:reg/app:latest@" + dg('9') + "->reg/app:latest@" + dg('3')}},
		{name: "pin: a mutable tag at its digest is up to date",
			yaml: pinDeploy("s", "reg/app:latest@"+dg('3'), `fluxd.io/pin-digest: "true"`)},
		{name: "pin: a tag not pinned yet gets its digest",
			yaml: pinDeploy("s", "reg/app:latest", `fluxd.io/pin-digest: "true"`),
			want: []string{"s: app:reg/app:latest->reg/app:latest@" + dg('3')}},
		{name: "pin: a newer version is written with its digest",
			yaml: pinDeploy("s", "reg/app:1.0.0@"+dg('1'), `fluxd.io/pin-digest: "true"`, `fluxd.io/tag-all: "semver:*"`),
			want: []string{"s: app:reg/app:1.0.0@" + dg('1') + "->reg/app:1.1.0@" + dg('2')}},
		{name: "pin: a container's own pin annotation pins it",
			yaml: pinDeploy("s", "reg/app:1.0.0", `fluxd.io/pin-digest.app: "true"`, `fluxd.io/tag-all: "semver:*"`),
			want: []string{"s: app:reg/app:1.0.0->reg/app:1.1.0@" + dg('2')}},
		{name: "pin: a container's own false wins over the workload's true",
			yaml: pinDeploy("s", "reg/app:1.0.0", `fluxd.io/pin-digest: "true"`, `fluxd.io/pin-digest.app: "false"`, `fluxd.io/tag-all: "semver:*"`),
			want: []string{"s: app:reg/app:1.0.0->reg/app:1.1.0"}},
		{name: "no pin: an image pinned by hand is left alone, as before",
			yaml:   pinDeploy("s", "reg/app:latest@"+dg('9'), `fluxd.io/tag-all: "glob:*"`),
			reason: "is pinned by digest; annotate the workload fluxd.io/pin-digest"},
		{name: "keel: force takes the newest pushed tag, pinned",
			yaml: pinDeploy("s", "reg/app:latest@"+dg('3'), `keel.sh/policy: force`),
			want: []string{"s: app:reg/app:latest@" + dg('3') + "->reg/app:main-7@" + dg('4')}},
		{name: "keel: force with match-tag stays on a version tag and follows its digest",
			yaml: pinDeploy("s", "reg/app:1.0.0@"+dg('8'), `keel.sh/policy: force`, `keel.sh/match-tag: "true"`),
			want: []string{"s: app:reg/app:1.0.0@" + dg('8') + "->reg/app:1.0.0@" + dg('1')}},
		{name: "pin: a pinned tag gone from the registry is a skip that says so",
			yaml:   pinDeploy("s", "reg/app:gone@"+dg('3'), `fluxd.io/pin-digest: "true"`),
			reason: "reg/app:gone has no digest in the registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("s")}, AllLatest: true})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, flatten(plan)); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
			if tc.reason != "" && (len(plan.Items) != 1 || !strings.Contains(plan.Items[0].Reason, tc.reason)) {
				t.Errorf("plan %+v; want a skip saying %q", plan.Items, tc.reason)
			}
		})
	}
}

// A named release of a pinned service writes the tag with its digest;
// a pinned container already at that tag and digest is up to date.
func TestReleaseImagePinned(t *testing.T) {
	images := memImages{"reg/app": {
		{Repository: "reg/app", Tag: "1.0.0", Digest: dg('1')},
		{Repository: "reg/app", Tag: "1.1.0", Digest: dg('2')},
	}}
	dir := t.TempDir()
	yaml := pinDeploy("s", "reg/app:1.0.0@"+dg('1'), `fluxd.io/pin-digest: "true"`) +
		pinDeploy("done", "reg/app:1.1.0@"+dg('2'), `fluxd.io/pin-digest: "true"`) +
		pinDeploy("plain", "reg/app:1.0.0")
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("s"), id("done"), id("plain")}, Image: "reg/app:1.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"plain: app:reg/app:1.0.0->reg/app:1.1.0", "s: app:reg/app:1.0.0@" + dg('1') + "->reg/app:1.1.0@" + dg('2')}
	if diff := cmp.Diff(want, flatten(plan)); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
	for _, it := range plan.Items {
		if it.Service.Name == "done" && it.Action != UpToDate {
			t.Errorf("done: %s %q; want up to date", it.Action, it.Reason)
		}
	}
	if _, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("s")}, Image: "reg/app:1.1.0@" + dg('2')}); err == nil || !strings.Contains(err.Error(), "names a digest") {
		t.Errorf("a release of a digest: %v; want it refused", err)
	}
}

// A pinned automated container on latest, planned through the real
// registry client (SQLite cache) against a real, counting registry: a new
// push of latest is planned once the tag's re-check is due, for one
// manifest HEAD (and a GET of the moved manifest and its config); the
// repository's other tags cost nothing and its tag list is not read again.
func TestPinnedLatestCostsOneHead(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	host := reg.Host()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, host+"/app", 10000, 10010, t0); err != nil {
		t.Fatal(err)
	}
	pushLatest := func() string {
		t.Helper()
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag(host+"/app:latest", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	d1 := pushLatest()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(pinDeploy("s", host+"/app:latest@"+d1,
		`fluxd.io/automated: "true"`, `fluxd.io/pin-digest: "true"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	c, err := oci.New(oci.Config{Cache: store, Now: func() time.Time { return now },
		RecheckMin: time.Minute, RecheckMax: 4 * time.Minute, ListMin: time.Hour, ListMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(dirRepo{dir}, c, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan := func() []string {
		t.Helper()
		p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("s")}, AllLatest: true, Automated: true})
		if err != nil {
			t.Fatal(err)
		}
		return flatten(p)
	}
	if got := plan(); len(got) != 0 {
		t.Fatalf("latest at its pinned digest: %v; want no update", got)
	}
	d2 := pushLatest()
	reg.Reset()
	if got := plan(); len(got) != 0 {
		t.Errorf("before the re-check is due: %v; want no update yet", got)
	}
	if n := reg.Requests(); n != 0 {
		t.Errorf("a plan before the re-check is due made %d registry requests; want none", n)
	}
	now = now.Add(2 * time.Minute)
	reg.Reset()
	want := "s: app:" + host + "/app:latest@" + d1 + "->" + host + "/app:latest@" + d2
	if got := plan(); len(got) != 1 || got[0] != want {
		t.Errorf("once due: %v; want %s", got, want)
	}
	if reg.Heads.Load() != 1 || reg.Lists.Load() != 0 || reg.Manifests.Load() != 1 || reg.Blobs.Load() != 1 {
		t.Errorf("the plan that saw latest move made %d HEADs, %d lists, %d manifest GETs, %d blob GETs; want 1, 0, 1, 1",
			reg.Heads.Load(), reg.Lists.Load(), reg.Manifests.Load(), reg.Blobs.Load())
	}
}
