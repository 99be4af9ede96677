package policy

import "strings"

// Pinned digests: a release writes repository:tag@sha256:... for a
// pinned container, and an automated pinned container on a tag that
// moves (latest, a branch name) is released again when the tag's digest
// moves (Keel's force, Flux v2's digestReflectionPolicy: Always).
const (
	// PinDigest "true" pins every container of the workload;
	// PinDigestPrefix+CONTAINER pins one (and "false" there unpins it
	// under a PinDigest "true").
	PinDigest       = "fluxd.io/pin-digest"
	PinDigestPrefix = "fluxd.io/pin-digest."
	// FollowTag "true": the automator keeps each pinned container on the
	// tag it runs and releases that tag's new digests only (Keel's
	// keel.sh/match-tag: "true" under the force policy).
	FollowTag = "fluxd.io/follow-tag"
)

// Pinned says whether container's images are pinned by digest under the
// policy ann (in fluxd's vocabulary, as Read returns it): its own
// annotation when it has one, else the workload's.
func Pinned(ann map[string]string, container string) bool {
	if v, ok := ann[PinDigestPrefix+container]; ok && container != "" {
		return v == "true"
	}
	return ann[PinDigest] == "true"
}

// FollowsTag says whether the automator keeps containers on their tag,
// following its digest.
func FollowsTag(ann map[string]string) bool { return ann[FollowTag] == "true" }

// pinKey says whether k is one of the pin annotations.
func pinKey(k string) bool {
	return k == PinDigest || k == FollowTag || (strings.HasPrefix(k, PinDigestPrefix) && len(k) > len(PinDigestPrefix))
}
