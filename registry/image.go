package registry

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// Image is one tag of a repository.
type Image struct {
	// Repository is the full repository, e.g. "ghcr.io/org/app".
	Repository string
	Tag        string
	Digest     string
	// CreatedAt is from the image config's created field, or the
	// org.opencontainers.image.created label where present.
	CreatedAt time.Time
}

// Dated reports whether the image has a real creation time: not absent,
// and not the Unix epoch that reproducible builds (ko, Bazel, Nix) write.
// Undated images sort last and are flagged in list-images.
func (i Image) Dated() bool { return i.CreatedAt.Unix() > 0 }

// Ref returns repository:tag.
func (i Image) Ref() string { return i.Repository + ":" + i.Tag }

// validTag is the tag grammar of the OCI distribution spec.
var validTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// ValidTag reports whether s is a tag by the OCI distribution spec's
// grammar, [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}. Tags come from registries,
// which may be hostile, and end up in YAML: one with a newline or a quote
// in it could add fields to a workload.
func ValidTag(s string) bool { return validTag.MatchString(s) }

// Ref is a parsed image reference.
type Ref struct {
	// Repository as written, e.g. "127.0.0.1:5000/app" or "nginx".
	Repository string
	// Tag; "latest" when the reference has neither a tag nor a digest.
	// Empty for a digest written alone (repo@sha256:...); kept when both
	// are written (repo:tag@sha256:..., a pinned image).
	Tag string
	// Digest is the manifest digest pinned with @, e.g. "sha256:...";
	// empty when none is written.
	Digest string
}

// ParseRef parses an image reference such as "reg:5000/app:1.2". It keeps
// the repository as written, so that it can be compared with what a
// manifest says, and checks it with go-containerregistry's parser.
func ParseRef(s string) (Ref, error) {
	if _, err := name.ParseReference(s, name.WeakValidation); err != nil {
		return Ref{}, BadRef(s, err)
	}
	if i := strings.Index(s, "@"); i >= 0 {
		// A digest pins the image; a tag written with it says which tag
		// it was read from (repo:tag@sha256:...), and is kept.
		repo, tag, digest := s[:i], "", s[i+1:]
		if j := strings.LastIndex(repo, ":"); j > strings.LastIndex(repo, "/") {
			repo, tag = repo[:j], repo[j+1:]
		}
		if tag != "" && !ValidTag(tag) {
			return Ref{}, fmt.Errorf("%q is not a valid image reference: tag %q must start with a letter, a digit or _", s, tag)
		}
		return Ref{Repository: repo, Tag: tag, Digest: digest}, nil
	}
	repo, tag := s, "latest"
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		repo, tag = s[:i], s[i+1:]
	}
	// go-containerregistry checks a tag's characters, not its first one.
	if !ValidTag(tag) {
		return Ref{}, fmt.Errorf("%q is not a valid image reference: tag %q must start with a letter, a digit or _", s, tag)
	}
	return Ref{Repository: repo, Tag: tag}, nil
}

// BadRef is the error for ref, which go-containerregistry's parser
// refused with err: it says what is wrong once, where err repeats the
// reference ("could not parse reference: REF"), and unwraps to err.
func BadRef(ref string, err error) error { return badRef{ref, err} }

type badRef struct {
	ref string
	err error
}

func (e badRef) Error() string {
	cause := strings.TrimSuffix(e.err.Error(), ": "+e.ref)
	if cause == "could not parse reference" {
		cause = "write it as [REGISTRY/]REPOSITORY[:TAG], e.g. reg.example:5000/team/app:1.2 (lower-case repository, no spaces)"
	}
	return fmt.Sprintf("%q is not a valid image reference: %s", e.ref, cause)
}

func (e badRef) Unwrap() error { return e.err }

// String returns repository:tag (without the digest: the tag as a
// registry is asked for it).
func (r Ref) String() string { return r.Repository + ":" + r.Tag }

// Pinned returns repository:tag@digest, the reference a release writes
// for an image pinned by digest; without a digest it is String.
func (r Ref) Pinned() string {
	if r.Digest == "" {
		return r.String()
	}
	if r.Tag == "" {
		return r.Repository + "@" + r.Digest
	}
	return r.String() + "@" + r.Digest
}

// PinDigest returns image (repository:tag, with or without a digest)
// pinned to digest: repository:tag@digest.
func PinDigest(image, digest string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	return image + "@" + digest
}

// HasTag reports whether the reference s names a tag or digest explicitly,
// rather than leaving the tag to default to "latest".
func HasTag(s string) bool {
	return strings.Contains(s, "@") || strings.LastIndex(s, ":") > strings.LastIndex(s, "/")
}

// SortNewestFirst orders images by creation time, newest first; images
// without a creation time (zero, as some build tools write for
// reproducibility) come last; equal times by tag, descending, for a stable
// order.
func SortNewestFirst(images []Image) {
	sort.SliceStable(images, func(i, j int) bool {
		a, b := images[i], images[j]
		if ad, bd := a.Dated(), b.Dated(); ad != bd {
			return ad
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.Tag > b.Tag
	})
}

// CanonicalRepository is repository as registries know it: Docker Hub's
// short names spelled out (nginx is index.docker.io/library/nginx). A
// repository that does not parse is returned as it is.
func CanonicalRepository(repository string) string {
	r, err := name.NewRepository(repository, name.WeakValidation)
	if err != nil {
		return repository
	}
	return r.Name()
}

// RunsRepository says whether any of images (references as workloads
// name them) is of repository, spelled either way.
func RunsRepository(images []string, repository string) bool {
	want := CanonicalRepository(repository)
	for _, img := range images {
		ref, err := ParseRef(img)
		if err != nil {
			continue
		}
		if ref.Repository == repository || CanonicalRepository(ref.Repository) == want {
			return true
		}
	}
	return false
}
