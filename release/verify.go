package release

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/verify"
)

// Signature verification in a plan (issue 33). Where a profile of the
// verification config applies to a container's image (verify.Required:
// a repositories rule, or the workload's fluxd.io/verify annotations),
// each planned update is checked before it is planned:
//
//   - a release by hand (an image, or services named) of an image that
//     does not verify is refused, --force or not; Spec.AllowUnverified
//     (admin only, in the daemon) releases it anyway, and says so in the
//     commit and history;
//   - with AllLatest (the automator, --update-all-images) the newest
//     candidate that verifies is planned instead, walking the filter's
//     candidates newest first from the one the policy chose, down to the
//     running tag, and stopping at the first that verifies (at most
//     maxVerifyWalk checked); the item's Warnings name each newer image
//     skipped and why;
//   - the digest verified is the digest the plan read for the tag (the
//     same per-plan read a pinned container writes), so where the
//     service pins digests what is written is what was verified.
//
// Where no profile applies, nothing is read and the update carries a
// not-required Verification (none at all when fluxd has no verifier). A
// workload that asks for a profile by annotation while fluxd has no
// --verify-config is refused, never released unverified.

// Verifier is what a plan needs of signature verification: verify.Gate
// over --verify-config.
type Verifier interface {
	// Required names the profiles container's image, of repository,
	// must satisfy; none means no verification applies. An error is an
	// annotation naming a profile the config does not define.
	Required(ann map[string]string, container, repository string) ([]string, error)
	// Check verifies repository@digest against every required profile.
	Check(ctx context.Context, ann map[string]string, container, repository, digest string) (verify.Verdict, error)
}

// Verification outcomes, as a plan shows them.
const (
	VerifyVerified    = "verified"
	VerifyUnsigned    = "unsigned"
	VerifyFailed      = "failed"
	VerifyError       = "error"
	VerifyNotRequired = "not-required"
	// VerifyUnchecked is list-images' image whose digest is not read
	// yet: nothing was verified.
	VerifyUnchecked = "unchecked"
)

// ReasonUnverified is an AllLatest item's reason when every newer image
// was skipped for its signatures.
const ReasonUnverified = "no newer image passes signature verification"

// maxVerifyWalk bounds the candidates one container's AllLatest plan
// verifies: a repository of a thousand unsigned newer tags costs ten
// verifications, not a thousand, and the warning says the rest were not
// looked at.
const maxVerifyWalk = 10

// Verification is what checking an update's image found.
type Verification struct {
	// Outcome is verified, unsigned, failed, error (no verdict could be
	// reached), or not-required (no profile applies).
	Outcome string
	// Profiles are the profiles required.
	Profiles []string `json:",omitempty"`
	// Digest is the digest verified.
	Digest string `json:",omitempty"`
	// Detail says by which signer, or why not.
	Detail string `json:",omitempty"`
}

// String is the verification as a plan line shows it.
func (v Verification) String() string {
	switch v.Outcome {
	case VerifyNotRequired:
		return "not required"
	case VerifyVerified:
		return v.Detail
	}
	if v.Detail == "" {
		return v.Outcome
	}
	return v.Outcome + ": " + v.Detail
}

// commitLine is the verification as the commit message's body records
// it under the update, or "" where none applies.
func (v Verification) commitLine() string {
	if v.Outcome == "" || v.Outcome == VerifyNotRequired {
		return ""
	}
	line := "    signature: " + v.String()
	if v.Digest != "" && !strings.Contains(line, v.Digest) {
		line += " (at " + v.Digest + ")"
	}
	return line + "\n"
}

// SetVerifier makes plans verify images where a profile applies. Call
// before using e; without it, no image is verified, and a workload that
// asks for verification by annotation is refused.
func (e *Engine) SetVerifier(v Verifier) { e.verifier = v }

// verifyItem checks each update of a planned item, refusing (by hand),
// replacing (AllLatest) or keeping it, as the comment at the top says.
func (e *Engine) verifyItem(ctx context.Context, spec Spec, item *Item, def *gitrepo.Definition, lister *imageCache) error {
	if item.Action != Update || def == nil {
		return nil
	}
	var kept []ContainerUpdate
	var refusals []string
	for _, u := range item.Updates {
		target, err := registry.ParseRef(u.Target)
		if err != nil {
			kept = append(kept, u)
			continue
		}
		profiles, v := e.required(def, u.Container, target.Repository)
		if v == nil && len(profiles) == 0 {
			if e.verifier != nil {
				u.Verification = Verification{Outcome: VerifyNotRequired}
			}
			kept = append(kept, u)
			continue
		}
		if v == nil {
			v = e.verifyRef(ctx, lister, def, u.Container, target, profiles)
		}
		u.Verification = *v
		switch {
		case v.Outcome == VerifyVerified:
			kept = append(kept, u)
		case spec.AllowUnverified:
			item.Warnings = append(item.Warnings, fmt.Sprintf("%s: %s is released unverified (%s), as --allow-unverified asks", u.Container, u.Target, v))
			kept = append(kept, u)
		case !spec.AllLatest:
			refusals = append(refusals, fmt.Sprintf("container %s: %s is %s", u.Container, u.Target, v))
		default:
			if alt := e.olderVerified(ctx, lister, item, def, u, target, v); alt != nil {
				kept = append(kept, *alt)
			}
		}
	}
	if len(refusals) > 0 {
		return fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("cannot release %s: its image does not pass signature verification: %s", item.Service, strings.Join(refusals, "; ")),
			"Nothing was changed. Sign the image with a key of the profile named (cosign sign --key cosign.key IMAGE@DIGEST), or keyless as an identity it names (cosign sign IMAGE@DIGEST from that CI workflow), attest it where the profile requires an attestation (cosign attest --key cosign.key --type TYPE --predicate FILE IMAGE@DIGEST), or release an image that verifies; "+
				"'release --dry-run' shows each image's verification. --force does not lift this. An admin may release it anyway with --allow-unverified, which the commit and history record.")
	}
	item.Updates = kept
	if len(kept) == 0 {
		item.Action, item.Reason = Skip, ReasonUnverified
	}
	return nil
}

// required is the profiles container's image must satisfy, or a
// verification that already says why it cannot be checked (an
// annotation naming an unknown profile, or any annotation while fluxd
// has no verifier).
func (e *Engine) required(def *gitrepo.Definition, container, repository string) ([]string, *Verification) {
	if e.verifier == nil {
		if name := verify.Annotated(def.Annotations, container); name != "" {
			return []string{name}, &Verification{Outcome: VerifyError, Profiles: []string{name},
				Detail: fmt.Sprintf("the workload asks for verification profile %q, but fluxd runs without --verify-config, so nothing can verify it", name)}
		}
		return nil, nil
	}
	profiles, err := e.verifier.Required(def.Annotations, container, repository)
	if err != nil {
		return nil, &Verification{Outcome: VerifyError, Detail: err.Error()}
	}
	return profiles, nil
}

// verifyRef verifies ref (at its digest, or the one the plan reads for
// its tag) against profiles.
func (e *Engine) verifyRef(ctx context.Context, lister *imageCache, def *gitrepo.Definition, container string, ref registry.Ref, profiles []string) *Verification {
	v := &Verification{Profiles: profiles, Digest: ref.Digest}
	if v.Digest == "" {
		// Read now, not from the tag's cached metadata: a version tag
		// moved to another image after it was signed must be verified
		// at the digest it names now (one HEAD per candidate per plan).
		d, err := lister.headDigest(ctx, ref.Repository, ref.Tag)
		switch {
		case err != nil:
			v.Outcome, v.Detail = VerifyError, "cannot read its digest: "+fluxerr.FirstLine(err)
			return v
		case d == "":
			v.Outcome, v.Detail = VerifyError, fmt.Sprintf("%s has no digest in the registry", ref)
			return v
		}
		v.Digest = d
	}
	verdict, err := lister.verdict(ctx, e.verifier, def.Annotations, container, ref.Repository, v.Digest, profiles)
	if err != nil {
		v.Outcome, v.Detail = VerifyError, fluxerr.FirstLine(err)
		if errors.Is(err, verify.ErrNotBuilt) {
			v.Detail += " (keyless identities, and attestations without keys, are not verified yet: such a profile passes nothing)"
		}
		return v
	}
	v.Detail = verdict.String()
	switch verdict.Outcome() {
	case verify.Verified:
		v.Outcome = VerifyVerified
	case verify.Unsigned:
		v.Outcome = VerifyUnsigned
	case verify.Failed:
		v.Outcome = VerifyFailed
	default:
		v.Outcome, v.Detail = VerifyError, "no profile gave a verdict"
	}
	return v
}

// olderVerified walks the candidates after u's target, newest first, down
// to the running tag, and returns the update to the first that verifies
// (nil when none does); the item's Warnings name each image skipped.
func (e *Engine) olderVerified(ctx context.Context, lister *imageCache, item *Item, def *gitrepo.Definition, u ContainerUpdate, target registry.Ref, first *Verification) *ContainerUpdate {
	skipped := []string{fmt.Sprintf("%s (%s)", u.Target, first)}
	item.Unverified = append(item.Unverified, SkippedImage{Container: u.Container, Image: u.Target, Verification: *first})
	warn := func(tail string) {
		item.Warnings = append(item.Warnings, fmt.Sprintf("%s: skipped newer images that do not pass signature verification: %s; %s",
			u.Container, strings.Join(skipped, "; "), tail))
	}
	if first.Outcome == VerifyError || e.verifier == nil {
		// A registry down, a profile that cannot verify: another
		// candidate would fare no better.
		warn("nothing else was checked; " + u.Current + " stays")
		return nil
	}
	cur, ok := containerRef(def, u.Container)
	if !ok {
		warn("the running image is not known, so nothing older was checked")
		return nil
	}
	cands, err := candidatesAfter(ctx, lister, def, u.Container, cur, target.Tag)
	if err != nil {
		warn("the other candidates could not be listed: " + fluxerr.FirstLine(err))
		return nil
	}
	checked := 1
	for _, tag := range cands {
		if checked == maxVerifyWalk {
			warn(fmt.Sprintf("stopped after %d: the older ones were not checked; %s stays", maxVerifyWalk, u.Current))
			return nil
		}
		checked++
		ref := registry.Ref{Repository: target.Repository, Tag: tag}
		v := e.verifyRef(ctx, lister, def, u.Container, ref, first.Profiles)
		if v.Outcome == VerifyError && lister.missed {
			return nil // a read the warm-up did not make: planned again
		}
		if v.Outcome != VerifyVerified {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", ref, v))
			item.Unverified = append(item.Unverified, SkippedImage{Container: u.Container, Image: ref.String(), Verification: *v})
			if v.Outcome == VerifyError {
				warn("stopped at a check that could not be made; " + u.Current + " stays")
				return nil
			}
			continue
		}
		next := u
		if target.Digest != "" {
			ref.Digest = v.Digest // pinned: the digest verified is written
			next.Target = ref.Pinned()
		} else {
			next.Target = ref.String()
		}
		next.Verification = *v
		warn("releasing " + next.Target + ", the newest that does")
		return &next
	}
	warn("none newer than " + u.Current + " does, so it stays")
	return nil
}

// containerRef is container's image as git holds it.
func containerRef(def *gitrepo.Definition, container string) (registry.Ref, bool) {
	for _, c := range def.Containers {
		if c.Name == container {
			ref, err := registry.ParseRef(c.Image)
			return ref, err == nil
		}
	}
	return registry.Ref{}, false
}

// candidatesAfter lists the tags container's policy ranks below after
// (its first choice), newest first, down to but not including the
// running tag: the images an AllLatest plan would fall back to.
func candidatesAfter(ctx context.Context, lister *imageCache, def *gitrepo.Definition, container string, cur registry.Ref, after string) ([]string, error) {
	f, err := DefinitionFilter(def, container)
	if err != nil {
		return nil, err
	}
	if registry.HasTag(cur.Repository + ":" + cur.Tag) {
		if f, err = f.Bind(cur.Tag); err != nil {
			return nil, err
		}
	}
	var ranked []string
	if f.NeedsMetadata() {
		imgs, err := lister.matching(ctx, cur.Repository, f)
		if err != nil {
			return nil, err
		}
		for _, img := range imgs {
			ranked = append(ranked, img.Tag)
		}
	} else {
		tags, err := lister.tagList(ctx, cur.Repository)
		if err != nil {
			return nil, err
		}
		for _, t := range tags {
			if f.Match(t) {
				ranked = append(ranked, t)
			}
		}
		f.Rank(ranked)
	}
	var out []string
	seen := false
	for _, t := range ranked {
		if !seen {
			seen = t == after
			continue
		}
		if t == cur.Tag || (!f.NeedsMetadata() && def.ImagePolicy == nil && !f.Newer(t, cur.Tag)) {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// verdictKey is one verification within a plan.
type verdictKey struct{ repository, digest, profiles string }

type verdictAnswer struct {
	v   verify.Verdict
	err error
}

// verdict verifies repository@digest once per plan (an offline plan,
// under the git lock, answers only what its warm-up verified).
func (c *imageCache) verdict(ctx context.Context, v Verifier, ann map[string]string, container, repository, digest string, profiles []string) (verify.Verdict, error) {
	k := verdictKey{repository, digest, strings.Join(profiles, ",")}
	if r, ok := c.verdicts[k]; ok {
		return r.v, r.err
	}
	if c.offline {
		c.missed = true
		return verify.Verdict{}, errRegistryUnderLock
	}
	res, err := v.Check(ctx, ann, container, repository, digest)
	if c.verdicts == nil {
		c.verdicts = map[verdictKey]verdictAnswer{}
	}
	c.verdicts[k] = verdictAnswer{res, err}
	return res, err
}

// unverifiedNote is what a release with AllowUnverified adds to its
// commit message and history: the images it released unverified.
func unverifiedNote(spec Spec, plan *Plan) string {
	if !spec.AllowUnverified || plan == nil {
		return ""
	}
	var us []string
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		for _, u := range it.Updates {
			if v := u.Verification; v.Outcome != "" && v.Outcome != VerifyVerified && v.Outcome != VerifyNotRequired {
				us = append(us, fmt.Sprintf("%s %s=%s (%s)", it.Service, u.Container, u.Target, v))
			}
		}
	}
	if len(us) == 0 {
		return ""
	}
	return "Released unverified with --allow-unverified: " + strings.Join(us, "; ")
}

// VerifyImage is one image's verification as list-images shows it: ref
// (with its digest) checked as a release of it to container of def
// would check it, through the verifier (whose cache keeps a verified
// digest, so an unchanged one is not verified again). Nil where no
// profile applies. def may be nil (a workload not in git): only the
// repositories rules then apply.
func (e *Engine) VerifyImage(ctx context.Context, def *gitrepo.Definition, container string, ref registry.Ref) *Verification {
	if def == nil {
		def = &gitrepo.Definition{}
	}
	profiles, v := e.required(def, container, ref.Repository)
	if v != nil {
		return v
	}
	if len(profiles) == 0 {
		return nil
	}
	if ref.Digest == "" {
		return &Verification{Outcome: VerifyUnchecked, Profiles: profiles, Detail: "its digest is not read yet"}
	}
	return e.verifyRef(ctx, &imageCache{}, def, container, ref, profiles)
}
