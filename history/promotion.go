package history

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The promotion package's bundles, per-stage records and pauses, as the
// store keeps them. history sits below promotion and does not import
// it, so the rows are store-neutral: keys and times the store orders and
// matches by, and the rest as JSON that only promotion reads.
//
// They are keyed by pipeline, not by instance: the fluxds of several
// clusters sharing one PostgreSQL store, each running a stage of the
// same pipeline, read and write the same rows. That is how a bundle
// verified by one cluster's fluxd is promoted by another's.

// PromotionBundle is one bundle of a pipeline. It never changes.
type PromotionBundle struct {
	Pipeline string
	ID       string
	// Created orders a pipeline's bundles (oldest first).
	Created time.Time
	// Data is the bundle as JSON (promotion's).
	Data []byte
}

// PromotionRecord is one bundle's state in one stage, written by
// compare-and-swap on Version.
type PromotionRecord struct {
	Pipeline string
	Stage    string
	Bundle   string
	// Version counts the record's writes: 1 once it is first written.
	Version int64
	// Updated is when it was last written; PutPromotionRecord sets it
	// to the time of the write when it is zero.
	Updated time.Time
	// Data is the record as JSON (promotion's).
	Data []byte
}

// PromotionPause stops automatic promotion into one stage, until it is
// deleted.
type PromotionPause struct {
	Pipeline string
	Stage    string
	By       string
	Reason   string
	Since    time.Time
}

// Promotions keeps the promotion package's rows (see PromotionBundle).
type Promotions interface {
	// SavePromotionBundle stores b. A bundle already stored under its
	// pipeline and ID is kept as it is, whatever b holds: bundles are
	// immutable, and the first one stored stays.
	SavePromotionBundle(ctx context.Context, b PromotionBundle) error
	// PromotionBundles returns the pipeline's bundles, oldest first
	// (by Created, then ID).
	PromotionBundles(ctx context.Context, pipeline string) ([]PromotionBundle, error)
	// PutPromotionRecord writes r when the record stored under
	// (r.Pipeline, r.Stage, r.Bundle) is at r.Version, 0 meaning none is
	// stored, and returns r at its new version (r.Version+1). Otherwise
	// it writes nothing and returns an error wrapping ErrConflict:
	// another writer got there first. Of writers racing from one
	// version, exactly one succeeds.
	PutPromotionRecord(ctx context.Context, r PromotionRecord) (PromotionRecord, error)
	// PromotionRecords returns the pipeline's records, by stage, then
	// bundle.
	PromotionRecords(ctx context.Context, pipeline string) ([]PromotionRecord, error)
	// SetPromotionPause pauses p.Stage of p.Pipeline, replacing a pause
	// already set there.
	SetPromotionPause(ctx context.Context, p PromotionPause) error
	// DeletePromotionPause ends the stage's pause; a stage not paused is
	// left as it is.
	DeletePromotionPause(ctx context.Context, pipeline, stage string) error
	// PromotionPauses returns the pipeline's pauses, by stage.
	PromotionPauses(ctx context.Context, pipeline string) ([]PromotionPause, error)
}

// ErrConflict says a compare-and-swap write found the record at another
// version than the writer read: another writer changed it first. Read it
// again and decide again.
var ErrConflict = errors.New("the record was changed by another writer")

// Validate says what a bundle lacks to be stored.
func (b PromotionBundle) Validate() error {
	if b.Pipeline == "" || b.ID == "" {
		return fmt.Errorf("storing a promotion bundle: pipeline %q, ID %q: both are required", b.Pipeline, b.ID)
	}
	return nil
}

// Validate says what a record lacks to be stored.
func (r PromotionRecord) Validate() error {
	if r.Pipeline == "" || r.Stage == "" || r.Bundle == "" {
		return fmt.Errorf("storing a promotion record: pipeline %q, stage %q, bundle %q: all three are required", r.Pipeline, r.Stage, r.Bundle)
	}
	if r.Version < 0 {
		return fmt.Errorf("storing the promotion record of bundle %s in stage %s of %s: version %d is negative (0 writes a new record)", r.Bundle, r.Stage, r.Pipeline, r.Version)
	}
	return nil
}

// Validate says what a pause lacks to be stored.
func (p PromotionPause) Validate() error {
	if p.Pipeline == "" || p.Stage == "" {
		return fmt.Errorf("pausing a promotion stage: pipeline %q, stage %q: both are required", p.Pipeline, p.Stage)
	}
	return nil
}

// Conflict is the error PutPromotionRecord returns when r was not at
// r.Version.
func (r PromotionRecord) Conflict() error {
	if r.Version == 0 {
		return fmt.Errorf("bundle %s in stage %s of pipeline %s is stored already (the write expected none): %w", r.Bundle, r.Stage, r.Pipeline, ErrConflict)
	}
	return fmt.Errorf("bundle %s in stage %s of pipeline %s is no longer at version %d: %w", r.Bundle, r.Stage, r.Pipeline, r.Version, ErrConflict)
}

// Clean returns b with its text cleaned (see CleanText), as stores keep it.
func (b PromotionBundle) Clean() PromotionBundle {
	b.Pipeline, b.ID, b.Data = CleanText(b.Pipeline), CleanText(b.ID), cleanBytes(b.Data)
	return b
}

// Clean returns r with its text cleaned (see CleanText), as stores keep it.
func (r PromotionRecord) Clean() PromotionRecord {
	r.Pipeline, r.Stage, r.Bundle, r.Data = CleanText(r.Pipeline), CleanText(r.Stage), CleanText(r.Bundle), cleanBytes(r.Data)
	return r
}

// Clean returns p with its text cleaned (see CleanText), as stores keep it.
func (p PromotionPause) Clean() PromotionPause {
	p.Pipeline, p.Stage, p.By, p.Reason = CleanText(p.Pipeline), CleanText(p.Stage), CleanText(p.By), CleanText(p.Reason)
	return p
}

func cleanBytes(b []byte) []byte {
	if s := string(b); CleanText(s) != s {
		return []byte(CleanText(s))
	}
	return b
}
