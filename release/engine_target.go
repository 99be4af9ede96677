package release

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/editdistance"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// resolveTarget checks that the image to release exists, before anything
// else happens; a reference without a tag means its repository's newest
// image.
func (e *Engine) resolveTarget(ctx context.Context, image string, lister *imageCache) (registry.Ref, error) {
	target, err := registry.ParseRef(image)
	if err != nil {
		return registry.Ref{}, fluxerr.New(fluxerr.User, err, "")
	}
	if registry.HasTag(image) && registry.CosignArtifact(target.Tag) {
		// cosign's signatures, attestations and SBOMs are stored as
		// tags beside the image; they are never an image to run.
		return registry.Ref{}, fluxerr.New(fluxerr.User,
			fmt.Errorf("%s is one of cosign's own artifacts (a signature, attestation or SBOM stored as a tag), not an image to release", image),
			"Name the image's own tag (fluxctl list-images SERVICE lists them).")
	}
	if !registry.HasTag(image) {
		imgs, err := lister.get(ctx, target.Repository)
		if err != nil {
			return registry.Ref{}, err
		}
		// The newest image, never cosign's tags: a signature pushed
		// after the image is newer than it.
		i := slices.IndexFunc(imgs, func(img registry.Image) bool { return !registry.CosignArtifact(img.Tag) })
		if i < 0 {
			return registry.Ref{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("repository %s has no images", target.Repository), "")
		}
		target.Tag = imgs[i].Tag
		return target, nil
	}
	ok, err := lister.exists(ctx, target.String())
	if err != nil {
		return registry.Ref{}, err
	}
	if ok {
		return target, nil
	}
	host, repo := splitHost(target.Repository)
	help := "Check the tag for typos, and that it was pushed."
	if imgs, err := lister.get(ctx, target.Repository); err == nil && len(imgs) > 0 {
		var tags []string
		for _, i := range imgs {
			tags = append(tags, i.Tag)
		}
		help = "The closest tags that do exist: " + strings.Join(editdistance.Closest(target.Tag, tags, 3), ", ") + "."
	}
	return registry.Ref{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("image %s:%s not found in %s", repo, target.Tag, host), help)
}

// splitHost splits "host:port/path" into the registry and the repository.
func splitHost(repository string) (string, string) {
	if i := strings.IndexByte(repository, '/'); i > 0 && strings.ContainsAny(repository[:i], ".:") {
		return repository[:i], repository[i+1:]
	}
	return "docker.io", repository
}

// LockReason says who locked a workload and why, from its annotations.
func LockReason(ann map[string]string) string {
	r := ReasonLocked
	if by := ann[AnnotationLockedBy]; by != "" {
		r += " by " + by
	}
	if msg := ann[AnnotationLockMessage]; msg != "" {
		r += ": " + msg
	}
	return r
}

// unversioned is the reason for a container whose manifest names no tag.
func unversioned(c gitrepo.Container, target string) string {
	return fmt.Sprintf("container %s runs %q, which has no tag; use --force to pin it to %s", c.Name, c.Image, target)
}

func planImage(ctx context.Context, item *Item, def *gitrepo.Definition, target registry.Ref, force bool, lister *imageCache) {
	var already, untagged, problems []string
	for _, c := range def.Containers {
		ref, err := registry.ParseRef(c.Image)
		if err != nil || ref.Repository != target.Repository {
			continue
		}
		if !registry.HasTag(c.Image) && !force {
			untagged = append(untagged, unversioned(c, target.String()))
			continue
		}
		pinned := pinnedIn(def, c.Name)
		if msg := pinProblem(def, c, ref, pinned); msg != "" && pinned {
			problems = append(problems, msg)
			continue
		}
		if pinned {
			u, reason := planDigest(ctx, lister, c, ref, target.Tag)
			switch {
			case reason != "":
				problems = append(problems, reason)
			case u == nil:
				already = append(already, c.Name)
			default:
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		if ref.Tag == target.Tag && ref.Digest == "" && registry.HasTag(c.Image) {
			already = append(already, c.Name)
			continue
		}
		item.Updates = append(item.Updates, ContainerUpdate{Container: c.Name, Current: c.Image, Target: target.String()})
	}
	switch {
	case len(item.Updates) > 0:
		// resolveTarget checked that the image exists.
		item.Action = Update
	case len(problems) > 0:
		item.Action, item.Reason = Skip, strings.Join(problems, "; ")
		item.Warnings = append(item.Warnings, problems...)
	case len(untagged) > 0:
		item.Action, item.Reason = Skip, strings.Join(untagged, "; ")
	case len(already) > 0:
		item.Action, item.Reason = UpToDate, fmt.Sprintf("container %s already uses %s", strings.Join(already, ", "), target)
	default:
		item.Action, item.Reason = Skip, ReasonNotUsed
	}
}

func planLatest(ctx context.Context, item *Item, def *gitrepo.Definition, lister *imageCache, force bool) {
	var reasons []string
	problem := func(warn bool, format string, args ...any) {
		r := fmt.Sprintf(format, args...)
		reasons = append(reasons, r)
		if warn {
			item.Warnings = append(item.Warnings, r)
		}
	}
	for _, c := range def.Containers {
		ref, err := registry.ParseRef(c.Image)
		if err != nil || ref.Tag == "" {
			problem(false, "%s: image %q is pinned by digest or invalid", c.Name, c.Image)
			continue
		}
		pinned := pinnedIn(def, c.Name)
		if msg := pinProblem(def, c, ref, pinned); msg != "" {
			problem(pinned, "%s", msg)
			continue
		}
		untagged := !registry.HasTag(c.Image)
		f, err := DefinitionFilter(def, c.Name)
		if err == nil && !untagged {
			// An image without a tag is pinned (--force) to the newest
			// version, whatever its filter is bound to.
			f, err = f.Bind(ref.Tag)
		}
		if err != nil {
			problem(true, "%s: invalid policy: %v", c.Name, err)
			continue
		}
		if pinned && !untagged && followsTag(def, f, ref.Tag) {
			if u, reason := planDigest(ctx, lister, c, ref, ref.Tag); reason != "" {
				problem(false, "%s", reason)
			} else if u != nil {
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		newest, cands, err := lister.newest(ctx, ref.Repository, f)
		switch {
		case err != nil:
			problem(false, "%s: %s: %s", c.Name, ReasonRegistry, fluxerr.FirstLine(err))
			continue
		case cands == 0 && f.Kind != "":
			problem(true, "%s: tag filter %s matches no tag of %s", c.Name, f, ref.Repository)
			continue
		case cands == 0 && !registry.IsVersion(ref.Tag):
			problem(true, "%s: runs %q, which is not a version: without a tag filter fluxd does not guess which tag replaces it; set one (fluxctl policy SERVICE --tag-all 'semver:...' or 'glob:...')", c.Name, ref.Tag)
			continue
		case cands == 0:
			problem(false, "%s: %s (with no tag filter, only versions written like %q are candidates)", c.Name, ReasonNotFound, ref.Tag)
			continue
		case f.NeedsMetadata() && !newest.Dated():
			problem(true, "%s: no image of %s%s has a creation time, so the newest build cannot be told; order this container by semver (tag filter semver:...) or by name or number (tag order)", c.Name, ref.Repository, filterSuffix(f))
			continue
		}
		if untagged {
			if !force {
				reasons = append(reasons, unversioned(c, ref.Repository+":"+newest.Tag))
				continue
			}
		} else {
			if newest.Tag == ref.Tag && !pinned {
				continue
			}
			if newest.Tag == ref.Tag && ref.Digest != "" && def.ImagePolicy != nil && def.ImagePolicy.DigestReflection == "IfNotPresent" {
				continue // (Flux v2: IfNotPresent keeps a tag's digest until the tag changes)
			}
			if newest.Tag == ref.Tag {
				// A pinned tag that moved is released again.
				if u, reason := planDigest(ctx, lister, c, ref, ref.Tag); reason != "" {
					problem(false, "%s", reason)
				} else if u != nil {
					item.Updates = append(item.Updates, *u)
				}
				continue
			}
			if f.NeedsMetadata() {
				if cur, ok := lister.dated(ctx, ref.Repository, f, ref.Tag); ok && !newest.CreatedAt.After(cur.CreatedAt) {
					continue
				}
			} else if !f.Newer(newest.Tag, ref.Tag) && def.Format != gitrepo.FormatSetters {
				// (A Flux v2 ImagePolicy sets its fields to the tag it
				// picks, older or not, as Flux v2 does.)
				continue
			}
		}
		if pinned {
			if u, reason := planDigest(ctx, lister, c, ref, newest.Tag); reason != "" {
				problem(false, "%s", reason)
			} else if u != nil {
				item.Updates = append(item.Updates, *u)
			}
			continue
		}
		item.Updates = append(item.Updates, ContainerUpdate{Container: c.Name, Current: c.Image, Target: ref.Repository + ":" + newest.Tag})
	}
	switch {
	case len(item.Updates) > 0:
		item.Action = Update
	case len(reasons) > 0:
		item.Action, item.Reason = Skip, strings.Join(reasons, "; ")
	case len(def.Containers) == 0:
		item.Action, item.Reason = Skip, ReasonNoContainers
	default:
		item.Action, item.Reason = UpToDate, ReasonNoNewer
	}
}

func filterSuffix(f registry.Filter) string {
	if f.Kind == "" {
		return ""
	}
	return " passing " + f.String()
}
