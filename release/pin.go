package release

import (
	"context"
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format/setters"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/policy"
	"github.com/fluxd/fluxd/registry"
)

// Pinned digests (policy.PinDigest): a release of a pinned container
// writes repository:tag@digest, the digest read from the registry
// through the plan's imageCache (so, under the git lock, from what the
// warm-up read), and a pinned container whose tag's digest moved is
// planned again although its tag did not change.

// pinProblem says why container c (running ref) cannot be planned under
// its pin, or "": an image pinned by hand (tag@digest with no pin
// annotation) is left alone, as before pins existed; pins in a
// kustomization's images: entries are not built.
func pinProblem(def *gitrepo.Definition, c gitrepo.Container, ref registry.Ref, pinned bool) string {
	switch {
	case def.Format == gitrepo.FormatSetters:
		// A marked field: its ImagePolicy says whether it holds a
		// digest (digestReflectionPolicy); a kustomization's images:
		// digest is a field like any other.
		return ""
	case ref.Digest != "" && !pinned:
		return fmt.Sprintf("%s: image %q is pinned by digest; annotate the workload %s: \"true\" to have fluxd move the pin", c.Name, c.Image, policy.PinDigest)
	case pinned && def.Built:
		return fmt.Sprintf("%s: pinning digests through a kustomization's images: entries (%s) is not implemented yet; remove %s, or pin the image in the base", c.Name, def.File, policy.PinDigest)
	}
	return ""
}

// pinnedIn says whether def's container is pinned by digest: for an
// ImagePolicy's marked field, the policy reflects digests and the field
// holds the whole image or the digest; otherwise its annotations say
// so, and, for a marked field, the field holds the whole image (a :tag
// or :name field cannot hold a digest; the fields beside it that hold
// the image carry the pin).
func pinnedIn(def *gitrepo.Definition, container string) bool {
	if s, ok := setters.Of(def, container); ok && def.ImagePolicy.ReflectsDigest() {
		// Flux v2 2.6: a policy that reflects digests writes
		// repository:tag@digest in a whole-image field and the digest
		// in a :digest field.
		return s.Form == gitrepo.FormImage || s.Form == gitrepo.FormDigest
	}
	if !policy.Pinned(def.Annotations, container) {
		return false
	}
	if s, ok := setters.Of(def, container); ok && s.Form != gitrepo.FormImage {
		return false
	}
	return true
}

// followsTag says whether a pinned container stays on its tag and
// follows its digest: the workload says so (Keel's match-tag), or the
// tag is not a version and no filter says which tag replaces it
// ("latest", a branch name).
func followsTag(def *gitrepo.Definition, f registry.Filter, tag string) bool {
	return policy.FollowsTag(def.Annotations) || (f.Kind == "" && !registry.IsVersion(tag))
}

// planDigest is the update of pinned container c, running ref, to tag at
// the digest the registry has for it now; nil when it runs that already.
// reason, when not empty, says why it cannot be planned.
func planDigest(ctx context.Context, lister *imageCache, c gitrepo.Container, ref registry.Ref, tag string) (*ContainerUpdate, string) {
	d, err := lister.digest(ctx, ref.Repository, tag)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s: %s: %s", c.Name, ReasonRegistry, fluxerr.FirstLine(err))
	case d == "":
		return nil, fmt.Sprintf("%s: %s: %s:%s has no digest in the registry", c.Name, ReasonNotFound, ref.Repository, tag)
	case tag == ref.Tag && d == ref.Digest:
		return nil, ""
	}
	target := registry.Ref{Repository: ref.Repository, Tag: tag, Digest: d}
	return &ContainerUpdate{Container: c.Name, Current: c.Image, Target: target.Pinned()}, ""
}

// digest is the manifest digest of repository:tag, read once per plan
// with the tag's metadata (a mutable tag's digest is re-checked with one
// manifest HEAD when due, or after a notification refreshed it); "" when
// the registry has no such tag.
func (c *imageCache) digest(ctx context.Context, repo, tag string) (string, error) {
	if c.heads != nil {
		if h, ok := c.heads[headKey(repo, tag)]; ok {
			return h.digest, h.err // (a promotion read it now: headDigest)
		}
	}
	imgs, err := c.matching(ctx, repo, registry.Filter{Kind: "glob", Pattern: tag})
	if err != nil {
		return "", err
	}
	if img, ok := findTag(imgs, tag); ok {
		return img.Digest, nil
	}
	return "", nil
}
