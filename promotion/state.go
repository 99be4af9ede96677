package promotion

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Status is where a bundle is in one stage.
type Status string

// The states of a bundle in a stage (see the diagram in doc.go).
const (
	// AwaitingApproval: verified in the from-stage, waiting for this
	// stage's approvals (Approvers of Stage.Approvals).
	AwaitingApproval Status = "awaiting approval"
	// Promoted: committed into this stage; its rollout is followed.
	Promoted Status = "promoted"
	// Verifying: rolled out here; its checks run.
	Verifying Status = "verifying"
	// Soaking: its checks passed; it soaks until SoakUntil.
	Soaking Status = "soaking"
	// Verified: every gate of this stage passed. Stages that take from
	// this one may promote it.
	Verified Status = "verified"
	// Failed: a gate failed (Reason says which and why). It is never
	// promoted from this stage.
	Failed Status = "failed"
	// Superseded: another bundle was promoted over it before it was
	// verified (Reason names it).
	Superseded Status = "superseded"
)

// Record is one bundle's state in one stage, as the store keeps it: every
// replica, and a fluxd restarted mid-soak, reads the same.
type Record struct {
	Pipeline string
	Stage    string
	Bundle   string
	// Created is the bundle's: the newest bundle is the latest Created.
	Created time.Time
	Status  Status
	// Reason says why it Failed, or by what it was Superseded.
	Reason string
	// Since is when it entered Status.
	Since time.Time
	// RolledOut is when its rollout here ended (zero before).
	RolledOut time.Time
	// SoakUntil is when its soak ends (Soaking).
	SoakUntil time.Time
	// Passed are the checks it passed here, by name.
	Passed []string
	// Approvers are who approved it into this stage, each once, sorted.
	Approvers []string
	// PromotedBy is who promoted it into this stage: a person, CI's
	// webhook, or "fluxd" for an automatic promotion.
	PromotedBy string
	// Current says the stage's services run it (or are rolling out to it).
	Current bool
	// Job is the release job that moves the stage onto the bundle (its
	// instance and ID), until it ends: the promotion's or rollback's
	// commit, apply and rollout.
	Job, JobInstance string `json:",omitempty"`
	// Version is the store's, for its compare-and-swap writes
	// (Store.PutRecord); 0 for a record not stored yet.
	Version int64
}

// EventKind is what happened to a bundle in a stage.
type EventKind string

// The events Advance takes.
const (
	EvRolledOut     EventKind = "rolled-out"     // its rollout here ended, every service Ready
	EvRolloutFailed EventKind = "rollout-failed" // Reason
	EvCheckPassed   EventKind = "check-passed"   // Check
	EvCheckFailed   EventKind = "check-failed"   // Check, Reason
	EvApproved      EventKind = "approved"       // By
	EvSuperseded    EventKind = "superseded"     // Bundle: the one promoted over it
	EvTick          EventKind = "tick"           // time passed
)

// Event is one input to a record's machine.
type Event struct {
	Kind   EventKind
	Check  string
	By     string
	Reason string
	Bundle string
}

// ErrTransition is returned for an event that a state does not take:
// a check's result for a bundle that is not verifying, say. The record
// is returned unchanged.
var ErrTransition = errors.New("not a transition of this state")

// Advance steps one record by one event at time now, under its stage's
// gates. It never reads a clock: now is given, so a test, a replica and
// a restarted fluxd step alike.
//
// Soak is measured from the end of the rollout, once the checks passed,
// and belongs to the bundle: a newer bundle promoted over one that is
// soaking does not reset or stop its soak (Kargo's users' first
// complaint: every new build restarts the clock, so nothing is ever
// promoted automatically). The soaking bundle becomes verified when its
// time is up, and the newest verified bundle is the one promoted on.
func Advance(r Record, st Stage, ev Event, now time.Time) (Record, error) {
	was := r
	set := func(s Status) {
		r.Status, r.Since = s, now
	}
	switch ev.Kind {
	case EvTick:
		if r.Status == Soaking && !now.Before(r.SoakUntil) {
			set(Verified)
		}
		return r, nil
	case EvRolledOut:
		if r.Status != Promoted {
			break
		}
		r.RolledOut = now
		set(Verifying)
		r = afterChecks(r, st, now)
		return r, nil
	case EvRolloutFailed:
		if r.Status != Promoted && r.Status != Verifying {
			break
		}
		set(Failed)
		r.Reason = "rollout: " + ev.Reason
		return r, nil
	case EvCheckPassed:
		if r.Status != Verifying || !hasCheck(st, ev.Check) {
			break
		}
		if !slices.Contains(r.Passed, ev.Check) {
			r.Passed = append(slices.Clone(r.Passed), ev.Check)
			slices.Sort(r.Passed)
		}
		r = afterChecks(r, st, now)
		return r, nil
	case EvCheckFailed:
		if (r.Status != Verifying && r.Status != Soaking) || !hasCheck(st, ev.Check) {
			break
		}
		set(Failed)
		r.Reason = fmt.Sprintf("check %s: %s", ev.Check, ev.Reason)
		return r, nil
	case EvApproved:
		if r.Status != AwaitingApproval || ev.By == "" {
			break
		}
		if !slices.Contains(r.Approvers, ev.By) {
			r.Approvers = append(slices.Clone(r.Approvers), ev.By)
			slices.Sort(r.Approvers)
		}
		return r, nil
	case EvSuperseded:
		r.Current = false
		switch r.Status {
		case AwaitingApproval, Promoted, Verifying:
			set(Superseded)
			r.Reason = "superseded by bundle " + ev.Bundle
		}
		// Soaking soaks on; Verified, Failed and Superseded stay.
		return r, nil
	}
	return was, fmt.Errorf("bundle %s in stage %s is %s; %s: %w", r.Bundle, r.Stage, r.Status, ev.Kind, ErrTransition)
}

// afterChecks moves a verifying record on once every check passed: to
// Soaking, or straight to Verified with no soak.
func afterChecks(r Record, st Stage, now time.Time) Record {
	for _, c := range st.Checks {
		if !slices.Contains(r.Passed, c.Name) {
			return r
		}
	}
	r.Since = now
	if st.Soak > 0 {
		r.Status, r.SoakUntil = Soaking, now.Add(st.Soak)
	} else {
		r.Status = Verified
	}
	return r
}

func hasCheck(st Stage, name string) bool {
	for _, c := range st.Checks {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Approved says whether a record awaiting approval has all the stage
// asks for.
func (r Record) Approved(st Stage) bool {
	return r.Status == AwaitingApproval && len(r.Approvers) >= st.Approvals
}

// SoakLeft is how much of its soak a record has left at now.
func (r Record) SoakLeft(now time.Time) time.Duration {
	if r.Status != Soaking || !now.Before(r.SoakUntil) {
		return 0
	}
	return r.SoakUntil.Sub(now)
}
