package release

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxd/fluxd/history"
)

func (e *Engine) fail(ctx context.Context, instance string, spec Spec, plan *Plan, start time.Time, commit string, err error) error {
	return e.failAs(ctx, history.Failed, instance, spec, plan, start, commit, err)
}

// failAs is fail recorded as typ (Failed, or Cancelled for a user's
// cancel).
func (e *Engine) failAs(ctx context.Context, typ history.Type, instance string, spec Spec, plan *Plan, start time.Time, commit string, err error) error {
	if stopping(ctx) {
		return e.interrupted(instance, commit, err)
	}
	ev := event(instance, spec, plan, typ, start)
	ev.Commit, ev.Error = commit, err.Error()
	// Recorded even when the job's context ended (a user's cancel): the
	// row is the cancel's record.
	if _, rerr := e.recorder.Record(context.WithoutCancel(ctx), ev); rerr != nil {
		e.log.Error("recording a failed release in history failed", "error", rerr)
	}
	e.log.Warn("release failed", "instance", instance, "error", err)
	return err
}

// interrupted is fail for a job whose fluxd is stopping: nothing is
// recorded, and the error wraps ErrInterrupted so that the queue leaves
// the job live for whoever takes over.
func (e *Engine) interrupted(instance, commit string, err error) error {
	e.log.Info("fluxd is stopping: leaving the release for the next fluxd to carry on", "instance", instance, "commit", commit, "cause", err)
	return fmt.Errorf("%w (%v)", ErrInterrupted, err)
}

func event(instance string, spec Spec, plan *Plan, typ history.Type, start time.Time) history.Event {
	ev := history.Event{Instance: instance, Type: typ, User: spec.User, Message: messageOf(spec, plan), StartedAt: start, EndedAt: time.Now()}
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		ev.Services = append(ev.Services, it.Service.String())
		for _, u := range it.Updates {
			ev.Changes = append(ev.Changes, history.Change{Service: it.Service.String(), Container: u.Container, From: u.Current, To: u.Target,
				Verification: u.Verification.record()})
		}
	}
	return ev
}

// commitMessage is "Release <images> to <instance> by <user>", with a body
// listing every change.
func commitMessage(instance string, spec Spec, plan *Plan) string {
	if spec.Promotion != nil {
		return promotionCommitMessage(instance, spec, plan)
	}
	var targets []string
	seen := map[string]bool{}
	var body strings.Builder
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		fmt.Fprintf(&body, "\n%s\n", it.Service)
		for _, u := range it.Updates {
			fmt.Fprintf(&body, "  %s: %s -> %s\n", u.Container, u.Current, u.Target)
			if line := u.Verification.commitLine(); line != "" {
				body.WriteString(line)
			}
			if !seen[u.Target] {
				seen[u.Target] = true
				targets = append(targets, u.Target)
			}
		}
	}
	user := spec.User
	if user == "" {
		user = "unknown"
	}
	msg := fmt.Sprintf("Release %s to %s by %s\n", strings.Join(targets, ", "), instance, user)
	if m := messageOf(spec, plan); m != "" {
		msg += "\n" + m + "\n"
	}
	return msg + body.String()
}

// messageOf is the message recorded for spec carried out as plan. An
// automated release's message is written from the plan executed, not
// from the automator's decision: the job plans again when it runs, and a
// policy changed in between (a new tag filter) may choose other images.
func messageOf(spec Spec, plan *Plan) string {
	if spec.Promotion != nil {
		return PromotionMessage(spec)
	}
	if !spec.Automated || plan == nil || plan.Updates() == 0 {
		if note := unverifiedNote(spec, plan); note != "" {
			return strings.TrimSpace(spec.Message + "\n\n" + note)
		}
		return spec.Message
	}
	return AutomatedMessage(plan.Items)
}

// AutomatedMessage is "automated release of <service> <container>=<image>,
// ...; <service> ...", naming the updates among items.
func AutomatedMessage(items []Item) string {
	var targets []string
	for _, it := range items {
		if it.Action != Update {
			continue
		}
		var us []string
		for _, u := range it.Updates {
			us = append(us, u.Container+"="+u.Target)
		}
		targets = append(targets, it.Service.String()+" "+strings.Join(us, ", "))
	}
	return "automated release of " + strings.Join(targets, "; ")
}

// record is the verification as the history keeps it with the change,
// or nil where no profile applied.
func (v Verification) record() *history.Verification {
	if v.Outcome == "" || v.Outcome == VerifyNotRequired {
		return nil
	}
	return &history.Verification{Outcome: v.Outcome, Profiles: v.Profiles, Digest: v.Digest, Detail: v.Detail}
}
