package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry/oci"
)

// list-images with no limit (the proto default: all) of a cold repository,
// called three times: the page is not read before each answer on top of
// the background refresh, which the calls share. Reading every image once
// costs one manifest GET each.
func TestUnlimitedColdListImagesReadsEachImageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 400 images")
	}
	const n = 400
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, n, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, _ := pagedDaemon(t, repo, "0.1.0", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, oci.RateConfig{Rate: 200, Burst: 20})
	reg.Reset()
	for i := range 3 {
		_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(cis) != 1 || cis[0].Err != nil || len(cis[0].Available) != n {
			t.Fatalf("call %d: %+v", i, cis)
		}
	}
	// Wait for the background work: joining an in-flight refresh waits
	// for it; one that ended answers at once.
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := cis[0].Read; got != n {
		t.Errorf("after the refresh %d of %d images are read", got, n)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	if got := reg.Manifests.Load(); got > n+n/10 {
		t.Errorf("4 unlimited list-images of %d tags cost %d manifest GETs, want about %d (each image read once)", n, got, n)
	}
	t.Logf("manifest GETs %d, blob GETs %d, lists %d", reg.Manifests.Load(), reg.Blobs.Load(), reg.Lists.Load())
}

// A small repository under semver order: list-images reads the page and
// the running image, not every tag (before, a refresh of all 40).
func TestSemverListImagesOfASmallRepositoryReadsThePageOnly(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo := reg.Host() + "/team/app"
	if err := reg.PushVersions(context.Background(), repo, 0, 40, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	d, _ := pagedDaemon(t, repo, "0.0.1", map[string]string{"fluxd.io/tag-all": "semver:>=0.0.1"}, oci.RateConfig{})
	reg.Reset()
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
	if err != nil || len(cis) != 1 || cis[0].Err != nil || len(cis[0].Available) != 40 {
		t.Fatalf("%+v %v", cis, err)
	}
	<-d.refreshes.DoChan(repo, func() (any, error) { return nil, nil })
	<-d.pageReads.DoChan(repo+"\x00later", func() (any, error) { return nil, nil })
	if got := reg.Manifests.Load(); got > 4 {
		t.Errorf("a page of 3 under semver read %d manifests of 40 tags, want the page's and the running image's (4)", got)
	}
	for _, img := range cis[0].Available[:3] {
		if img.Digest == "" {
			t.Errorf("row %s of the page not read", img.Tag)
		}
	}
}
