package promotion

import (
	"fmt"
	"time"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// Pause stops automatic promotion into a stage: set by a person's
// promotion of a bundle other than the newest verified one, or by a
// rollback by hand, so that fluxd does not overwrite it. `fluxctl stages
// resume` ends it.
type Pause struct {
	By     string
	Reason string
	Since  time.Time
}

// View is what Next decides from: one pipeline's records, with what
// holds its stages.
type View struct {
	Records []Record
	// Paused are the stages paused, by name.
	Paused map[string]Pause
	// Locked are the stages one of whose services is locked, by name,
	// with the lock's message: promotion into them holds.
	Locked map[string]string
}

// Action is what Next asks of a stage.
type Action string

// The actions.
const (
	// ActPromote: promote Bundle into Stage (one commit through the
	// release engine, authored by "fluxd").
	ActPromote Action = "promote"
	// ActAwaitApproval: record Bundle as awaiting Stage's approvals.
	ActAwaitApproval Action = "await-approval"
	// ActRollback: put Stage back on Bundle, its last verified one,
	// since its current bundle failed a gate.
	ActRollback Action = "rollback"
	// ActHold: Bundle would be promoted into Stage, but Reason holds it
	// (paused, locked). Shown, not acted on.
	ActHold Action = "hold"
)

// Decision is one thing Next asks for.
type Decision struct {
	Stage  string
	Action Action
	Bundle string
	Reason string
}

// Next decides, for every stage of p, what to do now. It reads only v:
// the same records give the same decisions on every replica.
//
// The rules:
//   - A stage whose current bundle failed here, with rollbackOnFailure,
//     goes back to its last verified bundle.
//   - Otherwise a stage with a from-stage looks at the newest bundle
//     verified there. It is not taken if it was ever in this stage
//     (failed here, superseded, or current), or if it is older than the
//     bundle the stage runs now: a person's promotion of a newer bundle,
//     or of an older one (which also pauses the stage), is never undone by
//     fluxd while the stage is paused; once resumed, a stage moved back
//     from a bundle verified there goes forward to it again.
//   - With approvals, it waits for them, then is promoted.
//   - With auto, it is promoted; a paused stage, or one with a locked
//     service, holds it and says why.
func Next(p Pipeline, v View) []Decision {
	var out []Decision
	for _, st := range p.Stages {
		recs := stageRecords(v.Records, st.Name)
		cur, hasCur := current(recs)
		if hasCur && cur.Status == Failed && st.RollbackOnFailure {
			if last, ok := lastVerified(recs); ok && last.Bundle != cur.Bundle {
				out = append(out, Decision{Stage: st.Name, Action: ActRollback, Bundle: last.Bundle,
					Reason: fmt.Sprintf("bundle %s failed (%s); back to %s, the stage's last verified bundle", cur.Bundle, cur.Reason, last.Bundle)})
				continue
			}
		}
		if st.From == "" {
			continue
		}
		cand, ok := newestVerified(stageRecords(v.Records, st.From))
		if !ok {
			continue
		}
		here, seen := find(recs, cand.Bundle)
		if hasCur && cand.Created.Before(cur.Created) {
			continue
		}
		hold := ""
		if pz, ok := v.Paused[st.Name]; ok {
			hold = fmt.Sprintf("promotion into %s is paused by %s (%s): 'fluxctl stages resume %s' ends it", st.Name, pz.By, pz.Reason, st.Name)
		} else if msg, ok := v.Locked[st.Name]; ok {
			hold = fmt.Sprintf("a service of %s is locked (%s)", st.Name, msg)
		}
		switch {
		case st.Approvals > 0 && !seen:
			// Waiting for approvals is recorded even when held: people
			// may approve while the stage is paused.
			out = append(out, Decision{Stage: st.Name, Action: ActAwaitApproval, Bundle: cand.Bundle,
				Reason: fmt.Sprintf("verified in %s; needs %d approval(s)", st.From, st.Approvals)})
		case st.Approvals > 0 && here.Status == AwaitingApproval:
			if !here.Approved(st) {
				continue
			}
			out = append(out, decide(st, cand.Bundle, hold, fmt.Sprintf("approved by %d of %d", len(here.Approvers), st.Approvals)))
		case seen && here.Status == Verified && !here.Current && hasCur && (st.Auto || st.Approvals > 0):
			// Verified here before, and the stage was moved back to an
			// older bundle by hand (which paused it) and then resumed:
			// it goes forward again, without asking for approvals it had.
			out = append(out, decide(st, cand.Bundle, hold, fmt.Sprintf("the newest bundle verified in %s, verified here before", st.From)))
		case seen:
			// Promoted, failed or superseded here already.
		case st.Auto:
			out = append(out, decide(st, cand.Bundle, hold, fmt.Sprintf("the newest bundle verified in %s", st.From)))
		}
	}
	return out
}

func decide(st Stage, bundle, hold, why string) Decision {
	if hold != "" {
		return Decision{Stage: st.Name, Action: ActHold, Bundle: bundle, Reason: hold}
	}
	return Decision{Stage: st.Name, Action: ActPromote, Bundle: bundle, Reason: why}
}

// PausesAuto says whether a promotion by hand of bundle into stage
// pauses automatic promotion there: it does unless the bundle is the
// newest one verified in the stage's from-stage, which fluxd would
// have promoted anyway.
func PausesAuto(p Pipeline, stage, bundle string, v View) bool {
	st, ok := p.Stage(stage)
	if !ok || st.From == "" {
		return false
	}
	cand, ok := newestVerified(stageRecords(v.Records, st.From))
	return !ok || cand.Bundle != bundle
}

// Promotable says whether a bundle may be promoted into a stage by hand:
// it must be verified in the from-stage, or force is set (an admin's
// promotion of a bundle that is not, which is recorded as such).
func Promotable(p Pipeline, stage, bundle string, v View, force bool) error {
	st, ok := p.Stage(stage)
	if !ok {
		return fluxerr.New(fluxerr.Missing, fmt.Errorf("pipeline %s has no stage %q (stages: %s)", p.Name, stage, stageNames(p)), "")
	}
	if st.From == "" {
		return fluxerr.New(fluxerr.User, fmt.Errorf("stage %s is the pipeline's first: it takes new images by release or automation, not by promotion", stage), "")
	}
	if here, ok := find(stageRecords(v.Records, stage), bundle); ok && here.Status == Failed && !force {
		return fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s failed in %s (%s); it is not promoted there again", bundle, stage, here.Reason), "A bundle that failed in a stage is not promoted there; promote another, or with --force (admins) if you must.")
	}
	from, ok := find(stageRecords(v.Records, st.From), bundle)
	switch {
	case !ok && !force:
		return fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s was never in %s, the stage %s takes from", bundle, st.From, stage), "Promote a bundle verified there (fluxctl bundles lists them), or use --force.")
	case ok && from.Status != Verified && !force:
		return fluxerr.New(fluxerr.Precondition, fmt.Errorf("bundle %s is %s in %s, not verified; promote a verified bundle ('fluxctl bundles' lists them)", bundle, from.Status, st.From), "Promote a verified bundle, or use --force.")
	}
	return nil
}

func stageNames(p Pipeline) string {
	s := ""
	for i, st := range p.Stages {
		if i > 0 {
			s += ", "
		}
		s += st.Name
	}
	return s
}

func stageRecords(all []Record, stage string) []Record {
	var out []Record
	for _, r := range all {
		if r.Stage == stage {
			out = append(out, r)
		}
	}
	return out
}

func current(recs []Record) (Record, bool) {
	for _, r := range recs {
		if r.Current {
			return r, true
		}
	}
	return Record{}, false
}

func find(recs []Record, bundle string) (Record, bool) {
	for _, r := range recs {
		if r.Bundle == bundle {
			return r, true
		}
	}
	return Record{}, false
}

// newestVerified is the verified record of the latest bundle.
func newestVerified(recs []Record) (Record, bool) {
	var best Record
	ok := false
	for _, r := range recs {
		if r.Status != Verified {
			continue
		}
		if !ok || r.Created.After(best.Created) || (r.Created.Equal(best.Created) && r.Bundle > best.Bundle) {
			best, ok = r, true
		}
	}
	return best, ok
}

// lastVerified is the record verified last in the stage: what the stage
// ran and trusted most recently.
func lastVerified(recs []Record) (Record, bool) {
	var best Record
	ok := false
	for _, r := range recs {
		if r.Status != Verified {
			continue
		}
		if !ok || r.Since.After(best.Since) || (r.Since.Equal(best.Since) && r.Bundle > best.Bundle) {
			best, ok = r, true
		}
	}
	return best, ok
}
