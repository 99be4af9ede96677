package release

import (
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// Annotations on a workload in git that set its policies: the vocabulary
// lives in package policy, which also reads Flux v1's and Keel's.
const (
	AnnotationAutomated   = policy.Automated
	AnnotationLocked      = policy.Locked
	AnnotationLockMessage = policy.LockMessage
	AnnotationLockedBy    = policy.LockedBy
	AnnotationLockedAt    = policy.LockedAt
)

// Spec says what to release.
type Spec struct {
	// Cached plans against the clone as it is, without fetching the
	// remote first: the status page's overview, asked for often. Never
	// for an execution.
	Cached bool
	// Services to release; with All, every service.
	Services []platform.ID
	All      bool
	// Exclude leaves services out.
	Exclude []platform.ID
	// Image is one image reference: every container running its
	// repository gets it. With AllLatest, each container gets the newest
	// image of its own repository instead.
	Image     string
	AllLatest bool
	// User and Message say who released and why.
	User, Message string
	// RolloutTimeout overrides the daemon's rollout timeout when positive.
	RolloutTimeout time.Duration
	// RollbackOnFailure reverts the release (a new commit, re-applied and
	// followed) when its rollout fails.
	RollbackOnFailure bool
	// Automated marks the automator's releases, recorded as such.
	Automated bool `json:",omitempty"`
	// NotifiedAt, on an automated release, is when the image notification
	// that led to it arrived (zero: none did), for the
	// notification-to-commit latency metric.
	NotifiedAt time.Time `json:",omitzero"`
	// Force releases services named explicitly although they are locked,
	// and pins manifests whose images have no tag.
	Force bool
	// AllowUnverified releases images that do not pass signature
	// verification (release/verify.go), which Force does not. The daemon
	// allows it to admins alone; the commit and history say what was
	// released unverified.
	AllowUnverified bool `json:",omitempty"`
	// Scope, when set, is the scope of the instance that asked: the
	// release considers only the services in it (with All: every service
	// in it), when it is planned and again when its job runs.
	Scope *auth.Scope `json:",omitempty"`
	// Promotion, when set, makes the release a promotion of a
	// pipeline's bundle (package promotion): every container of
	// Services that runs one of its images' repositories gets exactly
	// that image, its tag, and its digest where the service pins
	// digests. No filter or registry listing picks the image; the
	// registry is asked only whether each tag still names its digest,
	// and a tag moved since the bundle was verified is refused.
	Promotion *Promotion `json:",omitempty"`
}

// Promotion is what a promotion release moves: one bundle of a
// pipeline, into one of its stages.
type Promotion struct {
	Pipeline, Stage, Bundle string
	Images                  []PromotedImage
}

// PromotedImage is one image of a promoted bundle.
type PromotedImage struct {
	Repository, Tag, Digest string
}

// Action is what a plan does with a service.
type Action string

// The actions.
const (
	// Update changes one or more containers' images.
	Update Action = "update"
	// Skip leaves the service alone, for the item's Reason.
	Skip Action = "skip"
	// UpToDate means the service already runs the images asked for.
	UpToDate Action = "uptodate"
)

// Skip reasons.
const (
	ReasonNotInGit     = "not in git: the workload exists only in the cluster, so fluxd cannot release it"
	ReasonExcluded     = "excluded"
	ReasonLocked       = "locked"
	ReasonNoNewer      = "no newer image"
	ReasonNotUsed      = "does not use the image's repository"
	ReasonNotFound     = "image not found"
	ReasonRegistry     = "cannot read the registry"
	ReasonNoContainers = "no containers with images"
	ReasonNotAutomated = "no longer automated (read at the commit the release was made on)"
)

// ContainerUpdate is one container's change.
type ContainerUpdate struct {
	Container string
	Current   string
	Target    string
	// Verification is what checking Target's signatures found, where
	// fluxd verifies images (--verify-config); zero where it does not.
	Verification Verification `json:",omitzero"`
}

// Item is what the plan does with one service.
type Item struct {
	Service platform.ID
	Action  Action
	// Reason says why a service is skipped or up to date.
	Reason  string
	Updates []ContainerUpdate
	// File is where the service is defined in git.
	File string
	// Warnings are policy problems a user should fix: a filter that
	// matches no tag, an invalid pattern written in git, images with no
	// creation time under an order by build time.
	Warnings []string `json:",omitempty"`
	// Targets are the workloads a job applies for this item, recorded
	// when the job is planned (see Target): a take-over, a rollback, a
	// cancel's revert and a failure's rollback apply exactly these,
	// whatever git holds by then.
	Targets []Target `json:",omitempty"`
	// Unverified are the newer images an AllLatest plan skipped because
	// they do not pass signature verification (verify.go): the
	// automator tells the notification receivers of each once.
	Unverified []SkippedImage `json:",omitempty"`
}

// SkippedImage is a newer image a plan did not take, and why.
type SkippedImage struct {
	Container    string
	Image        string
	Verification Verification
}

// Plan is a computed release.
type Plan struct {
	// Revision is the git revision the plan was computed from.
	Revision string
	Items    []Item
	// Checksum covers Revision, Items and the images the targeted
	// workloads run; an execution given it runs only if it still matches.
	Checksum string
	// Promotion is the promotion the plan carries out (Spec.Promotion),
	// nil for any other release; the checksum covers it.
	Promotion *Promotion `json:",omitempty"`
	// Targeted says that the items' Targets were recorded when the job
	// was planned. A job saved by an older fluxd has none: its take-over
	// looks its workloads up in git (legacyTargets), and says so.
	Targeted bool `json:",omitempty"`
}

// Updates counts the container updates in the plan.
func (p *Plan) Updates() int {
	n := 0
	for _, it := range p.Items {
		n += len(it.Updates)
	}
	return n
}
