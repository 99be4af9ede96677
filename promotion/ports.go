package promotion

import (
	"context"
	"errors"
	"time"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// The promotion loop reaches everything outside it through the small
// interfaces below, as the automator does; cmd/fluxd wires in the
// adapters (the store's tables, the release engine and queue, the
// daemon's view of the cluster, the gates' HTTP, Job and Prometheus
// runners).

// Store keeps what every replica, every restart and every cluster's
// fluxd sharing the store must agree on: bundles, records and pauses.
type Store interface {
	// SaveBundle stores b. A bundle already stored under its pipeline
	// and ID is left as it is: bundles never change.
	SaveBundle(ctx context.Context, b Bundle) error
	// Bundles returns the pipeline's bundles, oldest first.
	Bundles(ctx context.Context, pipeline string) ([]Bundle, error)
	// Records returns the pipeline's records, each with its Version.
	Records(ctx context.Context, pipeline string) ([]Record, error)
	// PutRecord writes r when the stored record of (r.Pipeline,
	// r.Stage, r.Bundle) is at r.Version (0: none is stored), and
	// returns r at its new version. Otherwise it returns an error
	// wrapping ErrConflict and writes nothing: another replica moved
	// it first, so read again and decide again.
	PutRecord(ctx context.Context, r Record) (Record, error)
	// Pauses returns the pipeline's paused stages, by stage name.
	Pauses(ctx context.Context, pipeline string) (map[string]Pause, error)
	// SetPause pauses a stage, or with p nil resumes it.
	SetPause(ctx context.Context, pipeline, stage string, p *Pause) error
}

// ErrConflict: a record changed under a compare-and-swap write.
var ErrConflict = errors.New("the promotion record was changed by another writer")

// Releaser is the release engine and its job queue. A promotion is a
// release.Spec with Promotion set: planned, shown with --dry-run,
// confirmed by the plan's checksum, and committed through the engine's
// one checked commit path like any release.
type Releaser interface {
	Plan(ctx context.Context, spec release.Spec) (*release.Plan, error)
	Enqueue(ctx context.Context, instance string, spec release.Spec, checksum string) (jobs.JobUpdate, error)
	Get(ctx context.Context, instance, id string) (jobs.JobUpdate, error)
}

// Cluster says what a stage's services run now.
type Cluster interface {
	// Running returns one entry per service asked for, in order.
	Running(ctx context.Context, services []platform.ID) ([]Running, error)
}

// Running is what one service runs, and whether its rollout has ended.
type Running struct {
	Service platform.ID
	// Missing: the service is not in the cluster (or not in git).
	Missing bool
	// Ready: every workload of the service is Ready at its current
	// generation (its rollout ended), on real pods where they run.
	Ready bool
	// Failed says why its rollout failed, when it did.
	Failed     string
	Containers []RunningContainer
	// Locked is the lock's reason when the service is locked in git.
	Locked string
}

// RunningContainer is one container and the image it runs, as the
// workload's spec names it (repository:tag, @digest where pinned).
type RunningContainer struct {
	Name  string
	Image string
}

// Digests resolves an image's tag to the digest the registry gives it
// now (the registry adapter, through the image cache).
type Digests interface {
	Digest(ctx context.Context, image string) (string, error)
}

// Checker runs a stage's checks (the gates' adapters, wired by
// cmd/fluxd). Run returns nil when check c passes for bundle b in stage
// st, or an error saying why it failed, in words a person can act on. It
// honours ctx, and its own timeouts and retries from c.
type Checker interface {
	Run(ctx context.Context, c Check, st Stage, b Bundle) error
}

// Clock is the time, injected so tests step it.
type Clock func() time.Time
