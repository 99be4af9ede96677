package registry

import (
	"regexp"
	"strings"
	"time"
)

// CachedTag is what a metadata cache knows of a tag.
type CachedTag struct {
	Digest string
	// CreatedAt is the image's creation time; HasCreated says whether it
	// is known (a zero time can be a known "no creation time").
	CreatedAt  time.Time
	HasCreated bool
	// Stable counts the manifest HEADs in a row that found the same
	// digest; NextCheck is when a mutable tag is due for the next one.
	Stable    int
	NextCheck time.Time
	// ConfigDigest, Platform and Labels are the rest of what is known of
	// the image (see ImageMeta).
	ConfigDigest, Platform string
	Labels                 map[string]string
}

// ImageMeta is what the cache keeps of an image (a manifest digest): its
// config's digest and creation time, its labels and its platform (for an
// index, those of the platform fluxd picked).
type ImageMeta struct {
	CreatedAt    time.Time
	ConfigDigest string
	Platform     string
	Labels       map[string]string
}

// TagState is what a refresh learnt of a tag, for the cache.
type TagState struct {
	Digest    string
	Stable    int
	NextCheck time.Time
}

var (
	semverLike = regexp.MustCompile(`^v?\d+(\.\d+){0,3}([-+][0-9A-Za-z.+-]+)?$`)
	commitLike = regexp.MustCompile(`^([a-z]+[-_])?[0-9a-f]{7,40}$`)
)

// Immutable reports whether a tag is treated as never moving to another
// image: semantic versions and commit hashes. Such tags are not checked
// again once their digest is known. Everything else ("latest", branch
// names) is mutable and re-checked with a manifest HEAD.
func Immutable(tag string) bool {
	return semverLike.MatchString(tag) || commitLike.MatchString(tag)
}

// RefreshStatus is where the refresh of one repository stands.
type RefreshStatus struct {
	// Refreshing is true while a refresh runs, since Since.
	Refreshing bool
	Since      time.Time
	// RefreshedAt is the end of the last refresh that succeeded.
	RefreshedAt time.Time
	// LastError is why the last refresh failed; empty after a success.
	LastError string
}

// TagList is a repository's tag list as a store keeps it between
// restarts: the tags (sorted), how many reads in a row found the same
// list, when it is due to be read again, and when the read that found it
// began. ReadAt orders lists read by several replicas: a store keeps the
// one whose read began last.
type TagList struct {
	Tags   []string
	Stable int
	Next   time.Time
	ReadAt time.Time
}

// ListClockSkew is how far ahead of a clock a kept tag list's read may
// have begun and still be taken for one of this clock: a store writing
// a list replaces a kept one read further ahead (else it would be kept
// forever), and a reader does not trust such a list.
const ListClockSkew = time.Minute

// JoinTags and SplitTags turn a tag list into one string and back, for a
// store's single column: tags cannot hold a newline (see ValidTag).
func JoinTags(tags []string) string { return strings.Join(tags, "\n") }

// SplitTags is JoinTags' inverse; "" is no tags.
func SplitTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
