package history

import (
	"errors"
	"time"
)

// ErrNotFound is returned for a record that does not exist.
var ErrNotFound = errors.New("not found")

// Type is the kind of an event.
type Type string

// The event types.
const (
	Release          Type = "release"
	AutomatedRelease Type = "automated-release"
	Automate         Type = "automate"
	Deautomate       Type = "deautomate"
	Lock             Type = "lock"
	Unlock           Type = "unlock"
	Policy           Type = "policy"
	Failed           Type = "failed"
	Cancelled        Type = "cancelled"
	Rollback         Type = "rollback"
	// Sync is a sync of git to the cluster that changed something or
	// failed: kept under SyncInstance, which every instance reads.
	Sync Type = "sync"
	// The promotion events (package promotion): a bundle promoted into
	// a stage (by a person, or by fluxd, a rollback included), verified
	// there, failed a gate there, awaiting or given an approval, and a
	// stage's automatic promotion paused or resumed.
	Promoted         Type = "promoted"
	Verified         Type = "verified"
	PromotionFailed  Type = "promotion-failed"
	AwaitingApproval Type = "awaiting-approval"
	Approved         Type = "approved"
	PromotionPaused  Type = "paused"
	PromotionResumed Type = "resumed"
	// UnverifiedSkipped is a notice, never a history row (it is not in
	// Types): the automator skipped a newer image of a service because
	// it does not pass signature verification.
	UnverifiedSkipped Type = "unverified-skipped"
)

// SyncInstance keys the sync's events. The sync is the cluster's, not one
// instance's: every instance's history shows them. No token can name it
// (instance IDs start with a letter or digit).
const SyncInstance = "_sync"

// Types lists every event type.
var Types = []Type{Release, AutomatedRelease, Rollback, Failed, Cancelled, Automate, Deautomate, Lock, Unlock, Policy, Sync,
	Promoted, Verified, PromotionFailed, AwaitingApproval, Approved, PromotionPaused, PromotionResumed}

// Change is one container's image change.
type Change struct {
	Service   string `json:"service"`
	Container string `json:"container"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Verification is what checking To's signatures found, where a
	// verification profile applied to it (fluxd --verify-config, or the
	// workload's fluxd.io/verify annotations); nil where none did, and
	// for changes recorded by an earlier fluxd. It is kept with the
	// change (in the event's changes), so a reader sees the
	// verification of exactly the images it sees.
	Verification *Verification `json:"verification,omitempty"`
}

// Verification is one released image's signature verification, as the
// release's plan found it (release.Verification).
type Verification struct {
	// Outcome is "verified", "unsigned", "failed" or "error" (no verdict
	// could be reached): an image that did not verify was released only
	// with --allow-unverified.
	Outcome string `json:"outcome"`
	// Profiles are the verification profiles required of the image.
	Profiles []string `json:"profiles,omitempty"`
	// Digest is the digest verified.
	Digest string `json:"digest,omitempty"`
	// Detail says by which signer, profile by profile, or why not.
	Detail string `json:"detail,omitempty"`
}

// Event is one recorded action.
type Event struct {
	ID int64
	// Instance keys the event: only callers of this instance see it.
	Instance string
	Type     Type
	// Services are the IDs of the services the event concerns.
	Services []string
	User     string
	Message  string
	// Changes are the image changes a release made.
	Changes []Change
	// Commit is the git commit the action pushed, if any.
	Commit string
	// Error says why a failed operation failed.
	Error string
	// Sync is what a sync did, object by object; nil for other events
	// (and for syncs recorded by an earlier fluxd). A reader that does
	// not see everything is shown the sync as Event.For renders it from
	// these, never Message and Error, which name every team's objects.
	Sync *SyncDetail
	// Job is the release job that did it, if any. It is kept with the
	// event's notice (Outbox), not in the history row.
	Job       string
	StartedAt time.Time
	EndedAt   time.Time
}

// Query selects events.
type Query struct {
	// Service limits the events to one service ID; empty means all.
	Service string
	// Type limits the events to one type; empty means all.
	Type Type
	// User limits the events to those of users whose name contains it
	// (case-insensitive); empty means all.
	User string
	// Since and Until keep the events that ended in [Since, Until); a
	// zero time leaves that side open.
	Since, Until time.Time
	// Limit bounds the number of events; zero means 100.
	Limit int
}
