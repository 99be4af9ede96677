package release

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Promotions (Spec.Promotion): a pipeline's bundle moved into a stage's
// services. A promotion is a release like any named one (the same locks,
// scope, access checks, formats, plan, checksum and checked commit),
// with three differences:
//
//   - the images are given, each with its tag and digest: no filter or
//     registry listing picks one, and every container of the named
//     services running a bundle's repository gets that tag (and the
//     digest, where the service pins digests: pinnedIn);
//   - before anything is read for a service, each bundle image must be
//     run by a container of the named services (the stages run the same
//     things, or the bundle means nothing there), and the registry must
//     still give each tag the bundle's digest (a tag pushed again since
//     the bundle was verified is not what was verified): asked with a
//     manifest HEAD per image where the registry client can (tagHeader),
//     since the cache never reads a version tag's digest again, and the
//     pins written are that answer;
//   - it is all or nothing: a container running a bundle's repository
//     that cannot be moved (an image without a tag, a pin kept by hand, a
//     pin through a kustomization's images:) refuses the promotion,
//     rather than leaving the stage half on the bundle.
//
// Its commit says "Promote bundle B to S (pipeline P)", and its history
// row's message begins "promotion of bundle B to stage S (pipeline P)"
// (PromotionMessage): the row's type stays release (or failed), so that
// notifications and commit statuses treat it as one.

// sha256Digest is a digest as a bundle records it.
var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// validatePromotion is Validate for a spec with Promotion set.
func (s Spec) validatePromotion() error {
	p := s.Promotion
	var errs []error
	what := fmt.Sprintf("the promotion of bundle %q to stage %q", p.Bundle, p.Stage)
	switch {
	case s.All:
		errs = append(errs, fmt.Errorf("%s names all services: a promotion moves a stage's own services, named one by one", what))
	case len(s.Services) == 0:
		errs = append(errs, fmt.Errorf("%s names no services: name the stage's services", what))
	}
	if s.Image != "" || s.AllLatest {
		errs = append(errs, fmt.Errorf("%s also asks for an image (%q) or all latest images: a promotion's images are its bundle's, and nothing else", what, s.Image))
	}
	if s.Automated {
		errs = append(errs, fmt.Errorf("%s is marked as an automated release: an automatic promotion is not the automator's (locks and automation read differently); leave Automated unset and give the user \"fluxd\"", what))
	}
	if len(s.Exclude) > 0 {
		errs = append(errs, fmt.Errorf("%s excludes services: a promotion names exactly the services it moves; leave the others out of Services", what))
	}
	if p.Pipeline == "" || p.Stage == "" || p.Bundle == "" {
		errs = append(errs, fmt.Errorf("a promotion must name its pipeline, stage and bundle (got pipeline %q, stage %q, bundle %q)", p.Pipeline, p.Stage, p.Bundle))
	}
	if len(p.Images) == 0 {
		errs = append(errs, fmt.Errorf("%s has no images: a bundle holds at least one image (repository, tag and digest)", what))
	}
	seen := map[string]bool{}
	for i, img := range p.Images {
		if err := img.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: image %d: %w", what, i+1, err))
			continue
		}
		repo := registry.CanonicalRepository(img.Repository)
		if seen[repo] {
			errs = append(errs, fmt.Errorf("%s: repository %s is in the bundle twice: a bundle holds one image per repository, and fluxd cannot tell which one a container gets", what, img.Repository))
		}
		seen[repo] = true
	}
	if err := checkMessage(s.Message); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fluxerr.New(fluxerr.User, err, "A promotion carries a bundle fluxd recorded (its ID and its images, each with repository, tag and digest); promote a recorded bundle rather than writing one by hand.")
	}
	return nil
}

// check says what is wrong with one promoted image, or nil.
func (i PromotedImage) check() error {
	switch {
	case i.Repository == "":
		return errors.New("it has no repository")
	case i.Tag == "":
		return fmt.Errorf("%s has no tag: a promotion writes the tag it was verified with", i.Repository)
	case i.Digest == "":
		return fmt.Errorf("%s:%s has no digest: a promotion checks that the tag still names the digest that was verified", i.Repository, i.Tag)
	case !sha256Digest.MatchString(i.Digest):
		return fmt.Errorf("%s:%s's digest %q is not sha256:<64 lower-case hex digits>", i.Repository, i.Tag, i.Digest)
	}
	ref, err := registry.ParseRef(i.Repository + ":" + i.Tag + "@" + i.Digest)
	if err != nil {
		return err
	}
	if ref.Repository != i.Repository || ref.Tag != i.Tag {
		return fmt.Errorf("repository %q and tag %q do not make the reference %s:%s (a tag or digest inside the repository?)", i.Repository, i.Tag, ref.Repository, ref.Tag)
	}
	return nil
}

// String is repository:tag@digest.
func (i PromotedImage) String() string {
	return registry.Ref{Repository: i.Repository, Tag: i.Tag, Digest: i.Digest}.Pinned()
}

// PromotionMessage is the message of a promotion's history row:
// "promotion of bundle B to stage S (pipeline P)", then the spec's own
// message after a colon.
func PromotionMessage(spec Spec) string {
	p := spec.Promotion
	msg := fmt.Sprintf("promotion of bundle %s to stage %s (pipeline %s)", p.Bundle, p.Stage, p.Pipeline)
	if spec.Message != "" {
		msg += ": " + spec.Message
	}
	return msg
}

// promotionCommitMessage is "Promote bundle B to S (pipeline P)", the
// images of the bundle, then every change as commitMessage lists them.
func promotionCommitMessage(instance string, spec Spec, plan *Plan) string {
	p := spec.Promotion
	user := spec.User
	if user == "" {
		user = "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Promote bundle %s to %s (pipeline %s)\n\n", p.Bundle, p.Stage, p.Pipeline)
	if spec.Message != "" {
		fmt.Fprintf(&b, "%s\n\n", spec.Message)
	}
	fmt.Fprintf(&b, "Promoted to %s by %s. Images:\n", instance, user)
	for _, img := range p.Images {
		fmt.Fprintf(&b, "  %s\n", img)
	}
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", it.Service)
		for _, u := range it.Updates {
			fmt.Fprintf(&b, "  %s: %s -> %s\n", u.Container, u.Current, u.Target)
		}
	}
	return b.String()
}

// promoted is the bundle's image of repository (as a container names
// it), if the bundle has one.
func promoted(p *Promotion, repository string) (PromotedImage, bool) {
	want := registry.CanonicalRepository(repository)
	for _, img := range p.Images {
		if img.Repository == repository || registry.CanonicalRepository(img.Repository) == want {
			return img, true
		}
	}
	return PromotedImage{}, false
}

// checkPromotion refuses, before any registry read for a service, a
// bundle whose images the named services do not all run, and then a
// bundle one of whose tags the registry no longer gives its digest.
// Services outside the caller's scope, or not in git, do not count.
func checkPromotion(ctx context.Context, spec Spec, m *gitrepo.Manifests, lister *imageCache) error {
	p := spec.Promotion
	what := fmt.Sprintf("cannot promote bundle %s to stage %s (pipeline %s)", p.Bundle, p.Stage, p.Pipeline)
	run := map[string]bool{} // canonical repository → run by a named service
	var runs []string
	for _, id := range spec.Services {
		def, ok := m.Workloads[id]
		if !ok || !InScope(spec.Scope, id, def, m) {
			continue
		}
		for _, c := range def.Containers {
			if ref, err := registry.ParseRef(c.Image); err == nil {
				run[registry.CanonicalRepository(ref.Repository)] = true
				runs = append(runs, ref.Repository)
			}
		}
	}
	var missing []string
	for _, img := range p.Images {
		if !run[registry.CanonicalRepository(img.Repository)] {
			missing = append(missing, img.Repository)
		}
	}
	if len(missing) > 0 {
		runsNow := "none of them runs an image in git"
		if len(runs) > 0 {
			runsNow = "they run " + strings.Join(dedupe(runs), ", ")
		}
		return fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("%s: no container of its services (%s) runs %s: %s", what, joinIDs(spec.Services), strings.Join(missing, ", "), runsNow),
			"The stages of a pipeline must run the same images: check the stage's services in the Pipeline, and that their manifests in git run every repository of the bundle. Nothing was changed, and no registry was asked.")
	}
	for _, img := range p.Images {
		d, err := lister.headDigest(ctx, img.Repository, img.Tag)
		switch {
		case err != nil:
			if errors.Is(err, errRegistryUnderLock) {
				return err
			}
			return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("%s: cannot read %s:%s's digest from its registry: %s", what, img.Repository, img.Tag, fluxerr.FirstLine(err)),
				"The promotion checks that each tag still names the digest that was verified before it changes anything. Nothing was changed; try again once the registry answers.")
		case d == "":
			return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%s: %s:%s is no longer in its registry (the bundle was verified at %s)", what, img.Repository, img.Tag, img.Digest),
				"The tag was deleted since the bundle was verified. Nothing was changed. Push the image again under that tag, or promote a newer bundle.")
		case d != img.Digest:
			return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%s: the tag %s:%s moved since the bundle was verified: the registry gives it %s, the bundle %s", what, img.Repository, img.Tag, d, img.Digest),
				"Someone pushed that tag again, so it no longer names what was verified. Nothing was changed. Let the new image go through the pipeline from its first stage (it makes a new bundle), and use immutable tags (a version or a commit) for what you promote.")
		}
	}
	return nil
}

// tagHeader is an Images that reads a tag's digest from its registry
// now, with one manifest HEAD, whatever its cache holds (registry/oci's
// Client does).
type tagHeader interface {
	HeadDigest(ctx context.Context, ref string) (string, error)
}

type cachedDigest struct {
	digest string
	err    error
}

// headDigest is the digest repository:tag has in its registry now, read
// once per plan with a HEAD where the registry client can (tagHeader),
// else through the cache (digest). The rest of the plan reads the same
// answer (digest looks here first), so a pin is written with the digest
// just checked.
func (c *imageCache) headDigest(ctx context.Context, repo, tag string) (string, error) {
	h, ok := c.images.(tagHeader)
	if !ok {
		return c.digest(ctx, repo, tag)
	}
	key := headKey(repo, tag)
	if r, ok := c.heads[key]; ok {
		return r.digest, r.err
	}
	if c.offline {
		c.missed = true
		return "", errRegistryUnderLock
	}
	d, err := h.HeadDigest(ctx, repo+":"+tag)
	if c.heads == nil {
		c.heads = map[string]cachedDigest{}
	}
	c.heads[key] = cachedDigest{d, err}
	return d, err
}

// headKey keys heads: the repository as its registry knows it (a
// container may spell a Docker Hub repository short), and the tag.
func headKey(repo, tag string) string {
	return registry.CanonicalRepository(repo) + ":" + tag
}

func joinIDs(ids []platform.ID) string {
	var s []string
	for _, id := range ids {
		s = append(s, id.String())
	}
	return strings.Join(s, ", ")
}

// planPromotion plans item, the service def, in the promotion p: each
// container running one of the bundle's repositories is planned on its
// own, as a named release of that image's tag (planImage: every format
// it edits, pins written with the digest). A container that cannot be
// moved makes the item a skip whose reason says why; refuseHalfPromotion
// then refuses the promotion.
func planPromotion(ctx context.Context, item *Item, def *gitrepo.Definition, p *Promotion, force bool, lister *imageCache) {
	var already, problems []string
	for _, c := range def.Containers {
		ref, err := registry.ParseRef(c.Image)
		if err != nil {
			continue
		}
		img, ok := promoted(p, ref.Repository)
		if !ok {
			continue
		}
		if ref.Tag == img.Tag && ref.Digest == img.Digest && registry.HasTag(c.Image) {
			// Exactly the bundle's image (its digest pinned by hand, or
			// by a pin): nothing to write.
			already = append(already, c.Name)
			continue
		}
		one := *def
		one.Containers = []gitrepo.Container{c}
		sub := Item{Service: item.Service}
		// The container's own spelling of the repository: the edit
		// replaces its tag, never its registry's name.
		planImage(ctx, &sub, &one, registry.Ref{Repository: ref.Repository, Tag: img.Tag}, force, lister)
		item.Warnings = append(item.Warnings, sub.Warnings...)
		switch sub.Action {
		case Update:
			for _, u := range sub.Updates {
				if t, err := registry.ParseRef(u.Target); err != nil || t.Digest != "" && t.Digest != img.Digest {
					// (Not seen: the digest was read through the same
					// cache checkPromotion read it from.)
					problems = append(problems, fmt.Sprintf("%s: the registry gives %s:%s the digest of %s, not the bundle's %s", c.Name, ref.Repository, img.Tag, u.Target, img.Digest))
					continue
				}
				item.Updates = append(item.Updates, u)
			}
		case UpToDate:
			already = append(already, c.Name)
		default:
			problems = append(problems, sub.Reason)
		}
	}
	switch {
	case len(problems) > 0:
		item.Action, item.Reason, item.Updates = Skip, strings.Join(problems, "; "), nil
	case len(item.Updates) > 0:
		item.Action = Update
	case len(already) > 0:
		item.Action, item.Reason = UpToDate, fmt.Sprintf("container %s already runs bundle %s", strings.Join(already, ", "), p.Bundle)
	case len(def.Containers) == 0:
		item.Action, item.Reason = Skip, ReasonNoContainers
	default:
		item.Action, item.Reason = Skip, ReasonNotUsed
	}
}

// refuseHalfPromotion refuses a promotion's plan that would leave a named
// service off the bundle: one not in git, or with a container running a
// bundle's repository that cannot be moved. A service that runs none of
// the bundle's repositories is left alone, as a skip.
func refuseHalfPromotion(spec Spec, plan *Plan) error {
	var why []string
	for _, it := range plan.Items {
		if it.Action == Skip && it.Reason != ReasonNotUsed && it.Reason != ReasonNoContainers {
			why = append(why, fmt.Sprintf("%s: %s", it.Service, it.Reason))
		}
	}
	if len(why) == 0 {
		return nil
	}
	p := spec.Promotion
	return fluxerr.New(fluxerr.Precondition,
		fmt.Errorf("cannot promote bundle %s to stage %s (pipeline %s) as a whole: %s", p.Bundle, p.Stage, p.Pipeline, strings.Join(why, "; ")),
		"A promotion moves every container of the stage that runs the bundle's images, or none. Nothing was changed. Fix what is named in git, then promote again.")
}

// promotionSum is the checksum's line for a promotion: which bundle, into
// which stage of which pipeline, with which images.
func promotionSum(p *Promotion) string {
	var imgs []string
	for _, img := range p.Images {
		imgs = append(imgs, img.String())
	}
	return fmt.Sprintf("promotion %q %q %q %s\n", p.Pipeline, p.Stage, p.Bundle, strings.Join(imgs, " "))
}

// promotionChanged says how a plan's promotion differs from the
// confirmed one's, or "".
func promotionChanged(old, now *Promotion) string {
	switch {
	case old == nil && now == nil:
		return ""
	case old == nil:
		return fmt.Sprintf("the confirmed plan was a release, this one promotes bundle %s to %s", now.Bundle, now.Stage)
	case now == nil:
		return fmt.Sprintf("the confirmed plan promoted bundle %s to %s, this one is a release", old.Bundle, old.Stage)
	case promotionSum(old) == promotionSum(now):
		return ""
	case old.Bundle != now.Bundle:
		return fmt.Sprintf("the confirmed plan promoted bundle %s, this one bundle %s", old.Bundle, now.Bundle)
	case old.Stage != now.Stage || old.Pipeline != now.Pipeline:
		return fmt.Sprintf("the confirmed plan promoted to stage %s (pipeline %s), this one to %s (pipeline %s)", old.Stage, old.Pipeline, now.Stage, now.Pipeline)
	}
	return fmt.Sprintf("the confirmed plan promoted the images %s, this one %s", promotionSum(old), promotionSum(now))
}
