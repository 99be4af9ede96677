package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry/oci"
)

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
