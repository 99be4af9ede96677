package daemon

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
)

// imageVerifier is the side of the Releaser that checks one image's
// signatures as a release of it would (release.Engine.VerifyImage): a
// Releaser without it shows no verification in list-images.
type imageVerifier interface {
	VerifyImage(ctx context.Context, def *gitrepo.Definition, container string, ref registry.Ref) *release.Verification
}

// maxShownVerify bounds the images of one container list-images
// verifies per call (a page of --limit 0 shows them all): the rest show
// as not checked. A verified digest is kept by the verifier's cache, so
// a page shown again costs nothing.
const maxShownVerify = 50

// verifyWait bounds the verification of one container's page: an image
// not verified by then (a slow registry) shows as not checked, and the
// next listing asks again (a verified digest is kept by the cache).
var verifyWait = 10 * time.Second

// verifyConcurrency is how many of a page's images are verified at once.
const verifyConcurrency = 4

// verifyShown fills in ci.Verified for the images of ci.Available the
// page shows (and the running one), where a verification profile
// applies to them; nothing where none does.
func (d *Daemon) verifyShown(ctx context.Context, svc Service, ci *ContainerImages, page Page) {
	v, ok := d.deps.Releaser.(imageVerifier)
	if !ok || ci.Err != nil {
		return
	}
	def := svc.def
	if def == nil {
		def = &gitrepo.Definition{Annotations: svc.annotations}
	}
	var shown []registry.Image
	for i, img := range ci.Available {
		if (i < page.Offset || (page.Limit > 0 && i >= page.Offset+page.Limit)) && img.Ref() != ci.Current {
			continue
		}
		if registry.CosignArtifact(img.Tag) {
			continue // a signature or attestation, never run: nothing to verify
		}
		shown = append(shown, img)
	}
	if len(shown) == 0 {
		return
	}
	// One check first: where no profile applies to the repository none
	// applies to any of its images, and nothing more is asked.
	vctx, cancel := context.WithTimeout(ctx, verifyWait)
	defer cancel()
	results := make([]*release.Verification, len(shown))
	results[0] = v.VerifyImage(vctx, def, ci.Container, imageRef(shown[0]))
	if results[0] == nil {
		return
	}
	g, gctx := errgroup.WithContext(vctx)
	g.SetLimit(verifyConcurrency)
	for i := 1; i < len(shown) && i < maxShownVerify; i++ {
		g.Go(func() error {
			results[i] = v.VerifyImage(gctx, def, ci.Container, imageRef(shown[i]))
			return nil
		})
	}
	_ = g.Wait()
	ci.Verified = map[string]release.Verification{}
	for i, r := range results {
		switch {
		case r != nil && r.Outcome == release.VerifyError && vctx.Err() != nil && ctx.Err() == nil:
			ci.Verified[shown[i].Tag] = release.Verification{Outcome: release.VerifyUnchecked, Profiles: r.Profiles, Digest: r.Digest,
				Detail: fmt.Sprintf("not verified within %s (a slow registry?); list again: a digest verified is kept, not verified again", verifyWait)}
		case r != nil:
			ci.Verified[shown[i].Tag] = *r
		case i >= maxShownVerify:
			ci.Verified[shown[i].Tag] = release.Verification{Outcome: release.VerifyUnchecked,
				Detail: fmt.Sprintf("not checked: list-images verifies at most %d images of a container per call; page with --offset and --limit", maxShownVerify)}
		}
	}
}

// imageRef is img as a reference at its digest (none while it is being
// read).
func imageRef(img registry.Image) registry.Ref {
	return registry.Ref{Repository: img.Repository, Tag: img.Tag, Digest: img.Digest}
}
