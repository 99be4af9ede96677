package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
)

// cosign's own tags in a repository (a signature, an attestation, an SBOM
// and the referrers fallback index, all pushed after the releases, so the
// newest by build time) are never candidates in list-images, not even
// under glob:*: neither passing nor best, on either listing.
func TestListImagesNeverOffersCosignArtifacts(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repo, 0, 3, t0); err != nil {
		t.Fatal(err)
	}
	signed, err := name.NewTag(repo + ":" + regtest.Version(2))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(signed)
	if err != nil {
		t.Fatal(err)
	}
	fallback := strings.Replace(desc.Digest.String(), ":", "-", 1)
	artifacts := []string{fallback + ".sig", fallback + ".att", fallback + ".sbom", fallback}
	for i, tag := range artifacts {
		img, err := random.Image(32, 1)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.CreatedAt(img, v1.Time{Time: t0.Add(time.Hour + time.Duration(i)*time.Minute)}); err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}

	d, _ := pagedDaemon(t, repo, regtest.Version(0), map[string]string{"fluxd.io/tag-all": "glob:*"}, oci.RateConfig{})
	_, cis, err := d.ListImages(ctx, auth.Identity{}, "app")
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	ci := cis[0]
	if ci.Err != nil {
		t.Fatal(ci.Err)
	}
	if ci.Best != regtest.Version(2) {
		t.Errorf("best is %q, want %s: the newest release, not a cosign artifact", ci.Best, regtest.Version(2))
	}
	for _, tag := range ci.Passing {
		if registry.CosignArtifact(tag) {
			t.Errorf("glob:* passes cosign's %s in list-images: %v", tag, ci.Passing)
		}
	}
	if len(ci.Passing) != 3 {
		t.Errorf("passing %v, want the 3 releases", ci.Passing)
	}

	_, cis, err = d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 10})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	_, cis, _ = d.ListImagesPage(ctx, auth.Identity{}, "app", Page{Limit: 10})
	if ci = cis[0]; ci.Best != "" && ci.Best != regtest.Version(2) {
		t.Errorf("paged: best is %q, want %s", ci.Best, regtest.Version(2))
	}
	if slices.ContainsFunc(ci.Passing, registry.CosignArtifact) {
		t.Errorf("paged: glob:* passes cosign's artifacts: %v", ci.Passing)
	}
}
