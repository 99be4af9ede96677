package promotion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxd/fluxd/platform"
)

// Image is one image of a bundle: where it comes from, and exactly what
// it is.
type Image struct {
	Repository string // e.g. registry.example/team/web
	Tag        string
	Digest     string // sha256:…, the manifest's digest as the registry gave it
}

// Ref is the image as a manifest writes it: repository:tag, with
// @digest when the service pins digests.
func (i Image) Ref(pinDigest bool) string {
	r := i.Repository + ":" + i.Tag
	if pinDigest {
		r += "@" + i.Digest
	}
	return r
}

// Bundle is the images a stage's services ran once a release of them
// rolled out. It never changes: a different image is another bundle.
type Bundle struct {
	// ID names the bundle by its content (see NewBundle).
	ID string
	// Images are sorted by repository; one per repository.
	Images []Image
	// Pipeline and Stage are where the bundle was formed (the first
	// stage, in the normal course).
	Pipeline string
	Stage    string
	// Created is when it was formed; "newest" means the latest Created.
	Created time.Time
}

// IDLength is how many hex digits of the content hash a bundle's ID
// keeps: 12, as git's short commits, shown by the CLI and the page.
const IDLength = 12

// NewBundle makes a bundle of images: sorted, each repository once, each
// with a tag and a digest. Two different images of one repository are an
// error, since a promotion maps images onto the next stage by
// repository and could not tell which to write.
func NewBundle(pipeline, stage string, images []Image, created time.Time) (Bundle, error) {
	imgs := slices.Clone(images)
	slices.SortFunc(imgs, func(a, b Image) int { return strings.Compare(a.Repository, b.Repository) })
	imgs = slices.CompactFunc(imgs, func(a, b Image) bool { return a == b })
	for i, img := range imgs {
		if img.Repository == "" || img.Tag == "" {
			return Bundle{}, fmt.Errorf("image %q:%q of a bundle has no repository or tag", img.Repository, img.Tag)
		}
		if !strings.HasPrefix(img.Digest, "sha256:") || len(img.Digest) != len("sha256:")+64 {
			return Bundle{}, fmt.Errorf("image %s:%s has digest %q; a bundle needs each image's sha256 digest, as the registry reports it", img.Repository, img.Tag, img.Digest)
		}
		if i > 0 && imgs[i-1].Repository == img.Repository {
			return Bundle{}, fmt.Errorf("the stage runs two images of %s (%s and %s): a bundle holds one image per repository, so that a promotion knows which to write", img.Repository, imgs[i-1].Tag, img.Tag)
		}
	}
	if len(imgs) == 0 {
		return Bundle{}, fmt.Errorf("a bundle needs at least one image")
	}
	return Bundle{ID: bundleID(imgs), Images: imgs, Pipeline: pipeline, Stage: stage, Created: created}, nil
}

// bundleID hashes the images' repository, tag and digest, one line each
// in repository order. The tag is in it: the same digest tagged 1.2 and
// 1.2.0 writes different manifests.
func bundleID(imgs []Image) string {
	h := sha256.New()
	for _, img := range imgs {
		fmt.Fprintf(h, "%s\t%s\t%s\n", img.Repository, img.Tag, img.Digest)
	}
	return hex.EncodeToString(h.Sum(nil))[:IDLength]
}

// Target is one container of a service in the stage a bundle goes to,
// with the repository it runs.
type Target struct {
	Service    platform.ID
	Container  string
	Repository string
	// PinsDigest is set when the service's manifest writes image@digest,
	// so the promotion writes the digest too.
	PinsDigest bool
}

// Change is one container's new image in a promotion.
type Change struct {
	Service   platform.ID
	Container string
	Image     Image
	// Ref is what the manifest gets: repository:tag, @digest where the
	// service pins digests.
	Ref string
}

// Map maps a bundle's images onto the next stage's containers by
// repository. Containers whose repository is not in the bundle keep
// what they run (a sidecar of the next stage only). A bundle image that
// no container of the stage runs is an error: the stages do not run the
// same thing, and promoting part of a bundle would give the next stage
// something never verified together.
func (b Bundle) Map(targets []Target) ([]Change, error) {
	byRepo := make(map[string]Image, len(b.Images))
	for _, img := range b.Images {
		byRepo[img.Repository] = img
	}
	used := map[string]bool{}
	var out []Change
	for _, t := range targets {
		img, ok := byRepo[t.Repository]
		if !ok {
			continue
		}
		used[t.Repository] = true
		out = append(out, Change{Service: t.Service, Container: t.Container, Image: img, Ref: img.Ref(t.PinsDigest)})
	}
	var missing []string
	for _, img := range b.Images {
		if !used[img.Repository] {
			missing = append(missing, img.Repository)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("bundle %s holds %s, which no service of the stage runs: the stages run different repositories (check the stage's services and their images)", b.ID, strings.Join(missing, ", "))
	}
	slices.SortFunc(out, func(a, b Change) int {
		if c := a.Service.Compare(b.Service); c != 0 {
			return c
		}
		return strings.Compare(a.Container, b.Container)
	})
	return out, nil
}
