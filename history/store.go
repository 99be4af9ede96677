package history

import (
	"context"

	"github.com/fluxd/fluxd/registry"
)

// Store is everything fluxd keeps between runs: the event history, the
// release jobs, the registry metadata cache and promotion's state.
// history/sqlite (one file, one replica) and history/postgres (a server
// the replicas share) both satisfy it and pass the same contract tests
// (history/storetest).
//
// Consumers still declare the few methods they use (jobs.JobStore,
// oci.Cache, daemon.History); Store is what an adapter must provide, so
// a new kind of record is one more small interface embedded here, one
// more set of contract tests, and a migration per dialect.
type Store interface {
	EventLog
	JobLog
	JobOutput
	RegistryCache
	Outbox
	LiveLog
	WebSessions
	Promotions
	VerificationResults
	// Ping checks that the database answers, for readiness.
	Ping(ctx context.Context) error
	// Close releases the database.
	Close() error
}

// EventLog records and reads events, keyed by instance.
type EventLog interface {
	// Record stores ev (ev.Instance is required) and returns its ID;
	// IDs grow with every event.
	Record(ctx context.Context, ev Event) (int64, error)
	// Events returns the instance's events matching q, newest first.
	Events(ctx context.Context, instance string, q Query) ([]Event, error)
}

// JobLog keeps release jobs.
type JobLog interface {
	// SaveJob inserts or updates a job, keyed by its ID, and returns its
	// Seq, which orders jobs by creation.
	SaveJob(ctx context.Context, j Job) (int64, error)
	// Job returns one of the instance's jobs, or an error wrapping
	// ErrNotFound.
	Job(ctx context.Context, instance, id string) (Job, error)
	// Jobs returns the instance's most recent jobs, newest first.
	Jobs(ctx context.Context, instance string, limit int) ([]Job, error)
	// LiveJobs returns every queued or running job of every instance,
	// oldest first.
	LiveJobs(ctx context.Context) ([]Job, error)
}

// JobOutput keeps each job's log lines, for as long as the job is kept.
type JobOutput interface {
	// AppendJobLog stores one line; a line of the same job and Seq
	// already stored is left as it is.
	AppendJobLog(ctx context.Context, l JobLogLine) error
	// JobLog returns the lines of one of the instance's jobs after seq
	// after, in order, at most MaxJobLogLines of them: read on with the
	// last one's Seq as after.
	JobLog(ctx context.Context, instance, id string, after int64) ([]JobLogLine, error)
}

// MaxJobLogLines bounds the lines JobLog returns at once, so that a
// job's huge log is read in pages, not held whole in memory.
const MaxJobLogLines = 5000

// RegistryCache keeps what is known of registries' tags and images. It is
// shared by every instance: registry facts, not anything an instance did.
type RegistryCache interface {
	CachedTags(ctx context.Context, repository string) (map[string]registry.CachedTag, error)
	SaveTags(ctx context.Context, repository string, tags map[string]registry.TagState, images map[string]registry.ImageMeta, removed []string) error
	// TagList and SaveTagList keep each repository's tag list as last
	// read (registry.TagList): of two, the one whose read began last,
	// unless that one began more than registry.ListClockSkew ahead of the
	// writer's clock.
	TagList(ctx context.Context, repository string) (registry.TagList, bool, error)
	SaveTagList(ctx context.Context, repository string, l registry.TagList) error
}

// Exporter lists everything a store holds, for copying it to another
// store ('fluxd db copy').
type Exporter interface {
	// EachEvent calls fn with every event of every instance, oldest first.
	EachEvent(ctx context.Context, fn func(Event) error) error
	// EachJob calls fn with every job of every instance, oldest first.
	EachJob(ctx context.Context, fn func(Job) error) error
	// CachedRepositories lists the repositories the registry cache knows.
	CachedRepositories(ctx context.Context) ([]string, error)
	// PromotionPipelines lists the pipelines with promotion rows
	// (bundles, records or pauses), sorted.
	PromotionPipelines(ctx context.Context) ([]string, error)
	// EachVerificationResult calls fn with every verification result
	// kept.
	EachVerificationResult(ctx context.Context, fn func(VerificationResult) error) error
}
