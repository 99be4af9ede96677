package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
)

// The issue this answers: the first list-images of a 2,000-tag repository
// under a semver policy made fluxd fetch every tag's manifest and config
// (4,000 requests at its 100/s rate limit) and fluxctl gave up after 30 s.
// Now the page comes from the tag list, best first, with its images read,
// and the rest is read in the background.
//
// It runs a fluxd of its own, on a git path of its own, that asks for tag
// lists without a page size: the stack's registry (crane) honours n but
// sends no Link header, so pages of 1,000 would show 1,000 of the tags.
func TestListImagesOfABigRepositoryNeverRead(t *testing.T) {
	sharedFluxd(t)
	ctx := testContext(t)
	repo := stack.Registry + "/bigapp"
	base, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	pusher, err := remote.NewPusher()
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 images, each its own (its own creation time), tags 0.0.0 to
	// 0.19.99.
	version := func(i int) string { return fmt.Sprintf("0.%d.%d", i/100, i%100) }
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range 2000 {
		g.Go(func() error {
			img, err := mutate.CreatedAt(base, v1.Time{Time: t0.Add(time.Duration(i) * time.Minute)})
			if err != nil {
				return err
			}
			tag, err := name.NewTag(repo + ":" + version(i))
			if err != nil {
				return err
			}
			return pusher.Push(gctx, tag, img)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	pushManifest(t, "Add bigapp", map[string]string{"bigrepo/bigapp.yaml": policyDeployment("bigapp", repo+":0.1.0", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"})})
	f, err := stack.StartNamedFluxd(ctx, "fluxd-bigrepo", filepath.Join(binDir, "fluxd"), instance, nil,
		"--git-path=bigrepo", "--registry-page-size=0", "--automation-long-wait=10m", "--automation-short-wait=10m")
	if err != nil {
		t.Fatalf("starting fluxd: %v (log: %s)", err, stack.Log("fluxd-bigrepo"))
	}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	var out string
	err = poll(ctx, 30*time.Second, func() error {
		var stderr string
		var code int
		out, stderr, code = fluxctl(t, viewer, "list-images", "bigapp", "--limit", "3", "-o", "json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list-images bigapp: %v", err)
	}
	var rows []struct {
		Total     int `json:"total"`
		TimesRead int `json:"timesRead"`
		Images    []struct {
			Tag       string     `json:"tag"`
			CreatedAt *time.Time `json:"createdAt"`
			Reading   bool       `json:"reading"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("list-images -o json: %v\n%s", err, out)
	}
	r := rows[0]
	if r.Total != 2000 {
		t.Errorf("total %d, want 2000", r.Total)
	}
	// The three best versions first, each read (a creation time); the
	// running one is shown too.
	for i, want := range []string{"0.19.99", "0.19.98", "0.19.97"} {
		if i >= len(r.Images) {
			t.Fatalf("only %d images: %s", len(r.Images), out)
		}
		img := r.Images[i]
		if img.Tag != want || img.CreatedAt == nil || img.Reading {
			t.Errorf("row %d: %+v, want %s with its creation time", i, img, want)
		}
	}
	if r.TimesRead < 4 {
		t.Errorf("times read %d: the page and the running image should have been read", r.TimesRead)
	}
	table, _, _ := fluxctl(t, viewer, "list-images", "bigapp", "--limit", "3")
	t.Logf("fluxctl list-images bigapp --limit 3:\n%s", table)
	// Under semver order only the images shown are read, never all 2,000
	// tags: once the page is read nothing is being fetched, and the table
	// does not say so.
	if strings.Contains(table, "fetching creation times") {
		t.Errorf("the table says creation times are being fetched, though the page is read and semver order needs no others:\n%s", table)
	}
	if r.TimesRead >= r.Total {
		t.Errorf("all %d tags were read for a page of 3 under semver", r.Total)
	}
}
