package policy

// fluxd's own policy annotations: the one vocabulary every reader of a
// policy uses (Read translates the others into it).
const (
	// Automated "true": the automator releases new images by itself.
	Automated = "fluxd.io/automated"
	// AutomatedBy names the instance that automated a workload; its
	// automated releases are recorded in that instance's history.
	AutomatedBy = "fluxd.io/automated-by"
	// Locked "true": nothing releases the workload but a forced release
	// that names it.
	Locked      = "fluxd.io/locked"
	LockMessage = "fluxd.io/lock-message"
	LockedBy    = "fluxd.io/locked-by"
	LockedAt    = "fluxd.io/locked-at"

	// Tag filters (registry.ParseFilter syntax). A container's own filter
	// wins over the one for all containers; the order applies to glob and
	// regex filters (semver filters order by version).
	TagPrefix = "fluxd.io/tag."
	TagAll    = "fluxd.io/tag-all"
	TagOrder  = "fluxd.io/tag-order"
	// TagPrerelease "true" lets semver filters pass pre-releases.
	TagPrerelease = "fluxd.io/tag-prerelease"
)

// Prefixes of the other tools' annotations that Read understands.
const (
	FluxPrefix       = "fluxcd.io/"
	FluxLegacyPrefix = "flux.weave.works/"
	// FluxFilterPrefix+CONTAINER is Flux v1's other form of a
	// container's tag filter, fluxcd.io/tag.CONTAINER's equal (its
	// fluxctl reference and Helm operator guide document both; a name
	// after filter.fluxcd.io/ may be as long as a container's).
	FluxFilterPrefix = "filter.fluxcd.io/"
	KeelPolicy       = "keel.sh/policy"
	KeelMatchTag     = "keel.sh/match-tag"
)
